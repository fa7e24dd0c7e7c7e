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
- **At most TOOLHUB_PASSWORD_HASHES_PER_MACHINE hashes run at once on this machine**, across every worker
  process: a hash is CPU, and CPU is the machine's, so the bound is the machine's (default 1: on a 2-core
  machine one core stays for everyone else's requests). Each slot is a lock file in
  TOOLHUB_PASSWORD_HASH_LOCK_DIR held with `flock` (the kernel frees it when its process dies, so a killed
  worker never leaks a slot). Inside a request, one more is refused at once, without waiting and without
  hashing: PasswordCheckBusy (RATE_LIMITED, HTTP 429, `Retry-After: 1`). A refused login is not a failed
  login (django-axes does not count it): no password was checked. Outside a request (`createsuperuser`,
  `changepassword`, a seeding script, the shell) nobody is waiting on a socket and nothing holds a slot of the
  server's pool, so the hash waits for a slot instead, at most TOOLHUB_PASSWORD_HASH_WAIT_SECONDS (default
  30), then fails with PasswordSlotTimeout naming both settings. A request is what
  toolhub.lockout.PasswordCheckBusyMiddleware (every Django request) or the ASGI gate marks as one
  (`serving_request`).

- **A hash runs at the lowest CPU priority**, in a thread of its own (as many per worker as the machine has
  slots) niced to TOOLHUB_PASSWORD_HASH_NICENESS (default 19): the scheduler serves every other thread
  first, so the core a hash takes is the one nobody else wants at that moment.

The login endpoints take their slot before Django runs at all (toolhub.login_gate, in front of the ASGI
application): a login refused there costs no thread, no query and no parsing beyond its HTTP request. The
slot a request holds is marked in a context variable, so the hash inside that request runs in it.

The hashers are Django's own (same algorithms, same stored format), each with the guard around the methods
that hash: `encode`, `verify` and `harden_runtime`. A nested call (PBKDF2's `verify` calls `encode`) runs
inside the slot its caller holds.
"""

import contextvars
import fcntl
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from django.contrib.auth import hashers

from tools_app.kernel import telemetry
from tools_app.kernel.connections import release_connections
from tools_app.kernel.errors import ErrorCode, ToolhubError
from tools_app.kernel.limits import (
    PASSWORD_HASH_LOCK_DIR,
    PASSWORD_HASH_NICENESS,
    PASSWORD_HASH_WAIT_SECONDS,
    PASSWORD_HASHES_PER_MACHINE,
)

__all__ = [
    "Argon2PasswordHasher",
    "BCryptSHA256PasswordHasher",
    "PBKDF2PasswordHasher",
    "PBKDF2SHA1PasswordHasher",
    "PasswordCheckBusy",
    "PasswordSlotTimeout",
    "RequestSlot",
    "ScryptPasswordHasher",
    "hash_slot",
    "machine_slot",
    "release_connections",
    "serving_request",
    "slots_in_use",
    "take_slot_for_request",
]

logger = logging.getLogger(__name__)

WAIT_SETTING = PASSWORD_HASH_WAIT_SECONDS.setting
# How often a hash outside a request tries the slots again while it waits: short against a hash's half second,
# so that it gets a slot soon after one comes free, even while a burst of requests tries them too.
WAIT_POLL_SECONDS = 0.01
SETTING = PASSWORD_HASHES_PER_MACHINE.setting
RETRY_AFTER_SECONDS = 1


class PasswordCheckBusy(ToolhubError):
    """Every hashing slot of this machine is taken: RATE_LIMITED, try again in a second."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            ErrorCode.RATE_LIMITED,
            f"Too many password checks at once on this server (at most {limit} at a time: {SETTING}). "
            f"Retry in {RETRY_AFTER_SECONDS} s.",
            {"retry_after": RETRY_AFTER_SECONDS, "limit": limit, "setting": SETTING},
        )
        self.retry_after = RETRY_AFTER_SECONDS


class PasswordSlotTimeout(PasswordCheckBusy):
    """A hash outside a request waited TOOLHUB_PASSWORD_HASH_WAIT_SECONDS and no slot came free."""

    def __init__(self, limit: int, waited: float) -> None:
        super().__init__(limit)
        self.message = (
            f"No password-hashing slot came free within {waited:g} s ({WAIT_SETTING}): this machine runs at most "
            f"{limit} password hash(es) at a time ({SETTING}) and every slot stayed busy, most likely with logins "
            f"being refused or checked. Try again, or raise {WAIT_SETTING} or {SETTING}."
        )
        self.details = {**self.details, "waited_seconds": waited, "wait_setting": WAIT_SETTING}


def slot_limit() -> int:
    return PASSWORD_HASHES_PER_MACHINE.get()


def lock_dir() -> Path:
    configured = PASSWORD_HASH_LOCK_DIR.get()
    return Path(configured or Path(tempfile.gettempdir()) / f"toolhub-password-hashes-{os.getuid()}")


def wait_seconds() -> float:
    return PASSWORD_HASH_WAIT_SECONDS.get()


# True while this request (or thread) holds a slot: a hash inside it runs in that slot.
_holding: ContextVar[bool] = ContextVar("toolhub_password_slot_held", default=False)
# True while a request is being served: a hash then refuses at once when no slot is free (a client is waiting
# on a socket, and a waiting request would hold a thread); outside a request it waits for one.
_serving: ContextVar[bool] = ContextVar("toolhub_serving_request", default=False)


@contextmanager
def serving_request() -> Iterator[None]:
    """Mark the block as serving a request: a hash in it never waits for a slot."""
    marker = _serving.set(True)
    try:
        yield
    finally:
        _serving.reset(marker)


def _try_lock(path: Path | str) -> int | None:
    """An open descriptor holding the exclusive lock on `path`, or None when another holds it. Each try opens
    its own descriptor: flock locks belong to the open file, so two threads of one process exclude each
    other too."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


# The slot files per (TOOLHUB_PASSWORD_HASH_LOCK_DIR, slot limit), their directory made: a refusal under a
# burst then costs its open, flock and close, no path building and no mkdir.
_slot_files: dict[tuple[str, int], tuple[str, ...]] = {}


def _slot_paths(limit: int) -> tuple[str, ...]:
    key = (PASSWORD_HASH_LOCK_DIR.get(), limit)
    paths = _slot_files.get(key)
    if paths is None:
        directory = lock_dir()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        paths = _slot_files[key] = tuple(str(directory / f"slot-{index}.lock") for index in range(limit))
    return paths


def _first_free(paths: tuple[str, ...]) -> int | None:
    for path in paths:
        descriptor = _try_lock(path)
        if descriptor is not None:
            return descriptor
    return None


def _try_slots(limit: int) -> int | None:
    try:
        return _first_free(_slot_paths(limit))
    except FileNotFoundError:  # the directory was removed since it was made (a temporary-file cleaner)
        _slot_files.clear()
        return _first_free(_slot_paths(limit))


def _acquire(*, wait: bool = False) -> int:
    """The descriptor holding a free slot of this machine. None free: PasswordCheckBusy at once, or, with
    `wait`, try again every WAIT_POLL_SECONDS for up to TOOLHUB_PASSWORD_HASH_WAIT_SECONDS, then
    PasswordSlotTimeout."""
    limit = slot_limit()
    descriptor = _try_slots(limit)
    if descriptor is not None:
        return descriptor
    if not wait:
        telemetry.rate_limited("password_hashes")
        raise PasswordCheckBusy(limit)
    patience = wait_seconds()
    logger.warning(
        "Every password-hashing slot of this machine is busy (%s=%d); waiting up to %g s for one (%s).",
        SETTING,
        limit,
        patience,
        WAIT_SETTING,
    )
    deadline = time.monotonic() + patience
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(WAIT_POLL_SECONDS, left))
        descriptor = _try_slots(limit)
        if descriptor is not None:
            return descriptor
    raise PasswordSlotTimeout(limit, patience)


@contextmanager
def machine_slot() -> Iterator[None]:
    """Hold one of this machine's hashing slots for the block (nested: the one already held). Every slot taken:
    in a request, PasswordCheckBusy at once, without waiting (a few system calls, safe on the event loop);
    outside one, wait for a slot (see the module)."""
    if _holding.get():
        yield
        return
    descriptor = _acquire(wait=not _serving.get())
    marker = _holding.set(True)
    try:
        yield
    finally:
        _holding.reset(marker)
        os.close(descriptor)  # closing the descriptor drops its lock


class RequestSlot:
    """A slot taken for a request (take_slot_for_request). `release()` gives the slot back (once; later calls
    do nothing), from any task; `close()`, in the context that took it, also unmarks that context, so that
    nothing the request marked outlives it (a caller that runs the request in its own context, as
    asgiref's async_to_sync does, would otherwise keep the marks)."""

    def __init__(self, descriptor: int) -> None:
        self._descriptor: int | None = descriptor
        self._marks = (_holding.set(True), _serving.set(True))

    def release(self) -> None:
        if self._descriptor is not None:
            descriptor, self._descriptor = self._descriptor, None
            os.close(descriptor)

    def close(self) -> None:
        self.release()
        holding, serving = self._marks
        _serving.reset(serving)
        _holding.reset(holding)


def take_slot_for_request() -> RequestSlot:
    """Take a slot for the rest of the current context (an ASGI request's task, and the threads Django runs
    it in, which copy that context): hashes in it run in this slot. PasswordCheckBusy at once when none is
    free."""
    return RequestSlot(_acquire())


def slots_in_use() -> int:
    """How many of this machine's slots are held now (by any process): for tests and the bench."""
    directory = lock_dir()
    held = 0
    for index in range(slot_limit()):
        descriptor = _try_lock(directory / f"slot-{index}.lock") if directory.exists() else -1
        if descriptor is None:
            held += 1
        elif descriptor >= 0:
            os.close(descriptor)
    return held


@contextmanager
def hash_slot() -> Iterator[None]:
    """Hold one of this machine's hashing slots, with no database connection, while the block hashes;
    PasswordCheckBusy at once when every slot is taken."""
    with machine_slot():
        release_connections()
        yield


class _HashThreads:
    """The threads that compute hashes, at the lowest CPU priority (TOOLHUB_PASSWORD_HASH_NICENESS, default
    19): while a hash runs, the scheduler gives the cores to every other thread that wants one first (the
    requests of everyone else, in this worker and the others), and the hash takes what is left. On an idle
    machine a hash takes as long as before; under load, a login waits rather than everyone else. As many
    threads as the machine has slots; the request's thread waits for its hash."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._size = 0
        self._local = threading.local()

    def _started(self) -> None:
        self._local.hashing = True
        niceness = PASSWORD_HASH_NICENESS.get()
        if niceness > 0:
            try:  # Linux: the priority of this thread alone (its id); raising niceness needs no privilege
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
            except (OSError, AttributeError):
                logger.warning("Could not lower the priority of the password-hashing thread.", exc_info=True)

    def run(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if getattr(self._local, "hashing", False):
            return function(*args, **kwargs)  # nested (PBKDF2's verify calls encode): already here
        size = slot_limit()
        with self._lock:
            if self._executor is None or self._size != size:
                if self._executor is not None:
                    self._executor.shutdown(wait=False)
                self._executor = ThreadPoolExecutor(size, "password-hash", initializer=self._started)
                self._size = size
            executor = self._executor
        # The caller's context (its slot is marked there) goes with the hash.
        return executor.submit(contextvars.copy_context().run, function, *args, **kwargs).result()


_hash_threads = _HashThreads()


class _GuardedHasher:
    """The guard around the methods of a Django hasher that compute a hash: a slot, no database connection,
    the hashing thread."""

    def encode(self, *args: Any, **kwargs: Any) -> Any:
        with hash_slot():
            return _hash_threads.run(super().encode, *args, **kwargs)  # type: ignore[misc]

    def verify(self, *args: Any, **kwargs: Any) -> Any:
        with hash_slot():
            return _hash_threads.run(super().verify, *args, **kwargs)  # type: ignore[misc]

    def harden_runtime(self, *args: Any, **kwargs: Any) -> Any:
        with hash_slot():
            return _hash_threads.run(super().harden_runtime, *args, **kwargs)  # type: ignore[misc]


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
