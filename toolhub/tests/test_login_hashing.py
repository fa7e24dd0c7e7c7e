"""A password hash holds no database connection, and at most TOOLHUB_PASSWORD_HASHES_PER_WORKER run at once
(toolhub/passwords.py): a burst of bad logins from any number of addresses neither drains the connection
pool nor makes anyone else's request fail."""

import json
import os
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import hashers
from django.db import connection, connections
from rest_framework.test import APIClient

from tests.live_server import Uvicorn, run_python, server_database
from toolhub import passwords
from tools_app.models import ApiToken

PASSWORD = "pw-123456!"  # the root conftest's make_user default


class FastPBKDF2(passwords.PBKDF2PasswordHasher):
    """The guarded production hasher with few iterations, so that the suite stays fast."""

    iterations = 1000


@pytest.fixture
def guarded_hashing(settings, owner):
    """The guarded hasher in use, `owner`'s password stored with it."""
    settings.PASSWORD_HASHERS = [f"{__name__}.FastPBKDF2"]
    owner.set_password(PASSWORD)
    owner.save(update_fields=["password"])
    return owner


@pytest.fixture
def hash_events(monkeypatch):
    """What happens around each hash: ("close", alias) when a connection is given back, ("hash", holds) when
    PBKDF2 runs, `holds` saying whether this thread then held a database connection it could give back."""
    events: list[tuple[str, object]] = []
    wrapper = type(connections["default"])  # the backend's own class: SQLite's close() skips an in-memory database
    close = wrapper.close
    pbkdf2 = hashers.pbkdf2

    def spy_close(self):
        events.append(("close", self.alias))
        return close(self)

    def spy_pbkdf2(*args, **kwargs):
        # An in-memory SQLite database (the suite's) cannot be closed without losing it; close() keeps it.
        in_memory = connection.vendor == "sqlite" and connection.is_in_memory_db()
        events.append(("hash", connection.connection is not None and not in_memory))
        return pbkdf2(*args, **kwargs)

    monkeypatch.setattr(wrapper, "close", spy_close)
    monkeypatch.setattr(hashers, "pbkdf2", spy_pbkdf2)
    return events


def login(username="owner", password=PASSWORD, **extra):
    return APIClient().post("/api/auth/token/", {"username": username, "password": password}, format="json", **extra)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("username", "password", "status"),
    [("owner", "wrong", 400), ("nobody", "wrong", 400), ("owner", PASSWORD, 200)],
    ids=["wrong-password", "unknown-user", "right-password"],
)
def test_a_login_gives_its_connection_back_before_it_hashes(guarded_hashing, hash_events, username, password, status):
    """A login looks the user up, gives its database connection back (to the pool on PostgreSQL), then
    hashes: no connection is held during the hash, whether the password is wrong, the user unknown or the
    password right."""
    # given: the request has used its connection before the hash
    hash_events.clear()
    # when
    response = login(username, password)
    # then
    assert response.status_code == status
    hashes = [holds for kind, holds in hash_events if kind == "hash"]
    assert hashes == [False]
    first_hash = hash_events.index(("hash", False))
    # Given back to the pool on PostgreSQL; SQLite has no pool, and its connection stays (kernel.connections).
    assert (("close", "default") in hash_events[:first_hash]) is (connection.vendor == "postgresql")
    assert ApiToken.objects.count() == (1 if status == 200 else 0)


@pytest.mark.django_db(transaction=True)
def test_the_admin_login_hashes_without_a_connection(client, guarded_hashing, hash_events):
    """The admin's login form goes through the same hashers: no connection held while it hashes."""
    hash_events.clear()
    response = client.post("/admin/login/", {"username": "owner", "password": "wrong", "next": "/admin/"})
    assert response.status_code == 200
    assert [holds for kind, holds in hash_events if kind == "hash"] == [False]


@pytest.mark.django_db
def test_a_hash_inside_a_transaction_keeps_its_connection(guarded_hashing, hash_events):
    """A hash made inside a transaction (a password set by an authenticated write) keeps the connection:
    giving it back would end the transaction."""
    hash_events.clear()
    guarded_hashing.set_password("another-password-1")
    assert ("close", "default") not in hash_events
    assert [kind for kind, _ in hash_events] == ["hash"]


@pytest.fixture
def slots_taken(settings):
    """Every hashing slot of this process held by another thread until the test ends."""
    settings.TOOLHUB_PASSWORD_HASHES_PER_WORKER = 1
    holding, done = threading.Event(), threading.Event()

    def hold():
        with passwords.hash_slot():
            holding.set()
            done.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(5)
    yield
    done.set()
    thread.join()


@pytest.mark.django_db
@pytest.mark.parametrize("username", ["owner", "nobody"])
def test_a_login_over_the_hash_slots_is_a_fast_429_and_writes_nothing(
    guarded_hashing, hash_events, slots_taken, username
):
    """With every slot taken, a login is refused at once with 429 RATE_LIMITED and Retry-After: 1, without
    hashing; it is not a failed login (django-axes records nothing), and no token is issued."""
    hash_events.clear()
    # when
    response = login(username, "wrong")
    # then
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "1"
    assert response.json() == {
        "error": "RATE_LIMITED",
        "message": "Too many password checks at once on this server (at most 1 at a time: "
        "TOOLHUB_PASSWORD_HASHES_PER_WORKER). Retry in 1 s.",
        "details": {"retry_after": 1, "limit": 1, "setting": "TOOLHUB_PASSWORD_HASHES_PER_WORKER"},
    }
    assert [kind for kind, _ in hash_events] == []
    assert not ApiToken.objects.exists()
    assert not AccessAttempt.objects.exists()


@pytest.mark.django_db
def test_the_admin_login_over_the_hash_slots_is_a_429_page(client, guarded_hashing, slots_taken):
    """The admin login answers the same refusal as a short HTML page (the middleware), not a 500."""
    response = client.post("/admin/login/", {"username": "owner", "password": PASSWORD, "next": "/admin/"})
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "1"
    assert b"Too many password checks at once on this server" in response.content
    assert "_auth_user_id" not in client.session
    assert not AccessAttempt.objects.exists()


@pytest.mark.django_db
def test_a_slot_is_free_again_after_a_hash(guarded_hashing, settings):
    """Slots are given back whatever the outcome: one slot serves logins one after another."""
    settings.TOOLHUB_PASSWORD_HASHES_PER_WORKER = 1
    assert [login(password=p).status_code for p in ("wrong", PASSWORD, "wrong", PASSWORD)] == [400, 200, 400, 200]
    assert passwords._slots.running == 0


#
# A burst against a real server (PostgreSQL: its connection pool)
#


@pytest.mark.e2e
@pytest.mark.postgres
def test_a_burst_of_bad_logins_leaves_other_users_answered(tmp_path):
    """40 concurrent bad logins from 40 addresses (uvicorn trusts X-Forwarded-For from loopback), each
    within its rate, against one worker with a pool of 2 connections (2 s timeout) and the production
    hasher (~0.5 s): no 5xx for anyone; each bad login is a 400 or a fast 429; another user's calls made
    meanwhile all answer 200."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("needs PostgreSQL (its connection pool)")
    with server_database("loginhash", tmp_path, secret="s" * 50) as env:
        env = {**env, "DATABASE_POOL_MAX_SIZE": "2", "DATABASE_POOL_TIMEOUT": "2"}
        env.pop("TOOLHUB_DEV", None)  # the production hasher
        token = run_python(
            env,
            "from django.contrib.auth import get_user_model\n"
            "from tools_app.services import api_token_issue\n"
            "User = get_user_model()\n"
            "User.objects.create_user('victim', password='victim-password-1')\n"
            "other = User.objects.create_user('other', password='other-password-1')\n"
            "print(api_token_issue(user=other, via='test')[1])",
        )
        with Uvicorn(env) as server:

            def send(request: urllib.request.Request) -> int:
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:
                        return response.status
                except urllib.error.HTTPError as error:
                    return error.code
                except OSError:
                    return 0  # no answer within the timeout

            def bad_login(index: int) -> int:
                body = json.dumps({"username": "victim" if index % 2 else f"x{index}", "password": "wrong"}).encode()
                headers = {"Content-Type": "application/json", "X-Forwarded-For": f"10.9.0.{index + 1}"}
                return send(urllib.request.Request(f"{server.base}/api/auth/token/", data=body, headers=headers))

            def other_user(_: int) -> int:
                return send(
                    urllib.request.Request(f"{server.base}/api/tables/", headers={"Authorization": f"Token {token}"})
                )

            with ThreadPoolExecutor(max_workers=50) as pool:
                logins = pool.map(bad_login, range(40))
                others = pool.map(other_user, range(10))
                login_statuses, other_statuses = sorted(set(logins)), list(others)
    assert set(login_statuses) <= {400, 429}
    assert other_statuses == [200] * 10
