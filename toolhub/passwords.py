"""Password hashing that cannot drain the database pool or the CPU (settings.PASSWORD_HASHERS).

A password hash costs about half a second of CPU on purpose, and every anonymous caller can ask for one: a
login with a wrong password (the admin's, `POST /api/auth/token/`), a login for a username that does not
exist (Django hashes anyway, so that both take as long), an OAuth client authenticating with its secret.
Two rules hold for every hash made through the hashers below, whoever asks for it:

- **No database connection is held while it hashes.** Before hashing, the thread's connections go back to
  the pool (tools_app.kernel.connections: PostgreSQL's pool; SQLite has none). The next query takes one
  again. A connection inside a transaction (`atomic`) is kept: it
  cannot be given back without ending the transaction, and such callers are authenticated writes, not a
  login.
- **At most TOOLHUB_PASSWORD_HASHES_PER_WORKER hashes run at once in a process.** One more is refused at
  once, without waiting and without hashing: PasswordCheckBusy (RATE_LIMITED, HTTP 429, `Retry-After: 1`).
  A refused login is not a failed login (django-axes does not count it): no password was checked.

The hashers are Django's own (same algorithms, same stored format), each with the guard around the methods
that hash: `encode`, `verify` and `harden_runtime`. A nested call (PBKDF2's `verify` calls `encode`) runs
inside the slot its caller holds.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.contrib.auth import hashers

from tools_app.kernel import telemetry
from tools_app.kernel.connections import release_connections
from tools_app.kernel.errors import ErrorCode, ToolhubError

__all__ = [
    "Argon2PasswordHasher",
    "BCryptSHA256PasswordHasher",
    "PBKDF2PasswordHasher",
    "PBKDF2SHA1PasswordHasher",
    "PasswordCheckBusy",
    "ScryptPasswordHasher",
    "hash_slot",
    "release_connections",
]

DEFAULT_HASHES_PER_WORKER = 1
RETRY_AFTER_SECONDS = 1


class PasswordCheckBusy(ToolhubError):
    """Every hashing slot of this process is taken: RATE_LIMITED, try again in a second."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            ErrorCode.RATE_LIMITED,
            f"Too many password checks at once on this server (at most {limit} at a time: "
            f"TOOLHUB_PASSWORD_HASHES_PER_WORKER). Retry in {RETRY_AFTER_SECONDS} s.",
            {"retry_after": RETRY_AFTER_SECONDS, "limit": limit, "setting": "TOOLHUB_PASSWORD_HASHES_PER_WORKER"},
        )
        self.retry_after = RETRY_AFTER_SECONDS


class _Slots:
    """A non-blocking counting semaphore whose size follows the setting (read at each acquire)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._local = threading.local()

    def limit(self) -> int:
        return max(1, int(getattr(settings, "TOOLHUB_PASSWORD_HASHES_PER_WORKER", DEFAULT_HASHES_PER_WORKER)))

    @property
    def running(self) -> int:
        return self._running

    @contextmanager
    def held(self) -> Iterator[None]:
        if getattr(self._local, "held", False):
            yield  # nested in a hash this thread already holds a slot for
            return
        limit = self.limit()
        with self._lock:
            if self._running >= limit:
                telemetry.rate_limited("password_hashes")
                raise PasswordCheckBusy(limit)
            self._running += 1
        self._local.held = True
        try:
            yield
        finally:
            self._local.held = False
            with self._lock:
                self._running -= 1


_slots = _Slots()


@contextmanager
def hash_slot() -> Iterator[None]:
    """Hold one of this process's hashing slots, with no database connection, while the block hashes;
    PasswordCheckBusy at once when every slot is taken."""
    with _slots.held():
        release_connections()
        yield


class _GuardedHasher:
    """The guard around the methods of a Django hasher that compute a hash."""

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        with hash_slot():
            return super().encode(*args, **kwargs)  # type: ignore[misc]

    def verify(self, *args: Any, **kwargs: Any) -> Any:
        with hash_slot():
            return super().verify(*args, **kwargs)  # type: ignore[misc]

    def harden_runtime(self, *args: Any, **kwargs: Any) -> Any:
        with hash_slot():
            return super().harden_runtime(*args, **kwargs)  # type: ignore[misc]


class PBKDF2PasswordHasher(_GuardedHasher, hashers.PBKDF2PasswordHasher):
    pass


class PBKDF2SHA1PasswordHasher(_GuardedHasher, hashers.PBKDF2SHA1PasswordHasher):
    pass


class Argon2PasswordHasher(_GuardedHasher, hashers.Argon2PasswordHasher):
    pass


class BCryptSHA256PasswordHasher(_GuardedHasher, hashers.BCryptSHA256PasswordHasher):
    pass


class ScryptPasswordHasher(_GuardedHasher, hashers.ScryptPasswordHasher):
    pass
