"""A password hash holds no database connection, and at most TOOLHUB_PASSWORD_HASHES_PER_MACHINE run at once
on the machine, across worker processes (toolhub/passwords.py); the login endpoints take their slot, or are
refused 429, before Django runs (toolhub/login_gate.py): a burst of bad logins from any number of addresses
neither drains the connection pool, nor takes more than one core, nor makes anyone else's request fail."""

import asyncio
import base64
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model, hashers
from django.contrib.sessions.models import Session
from django.db import connection, connections
from oauth2_provider.models import get_access_token_model, get_application_model
from rest_framework.test import APIClient

from oauth_app.client_secrets import (
    HASHER_PATH,
    ClientSecretGenerator,
    FastSecretClients,
    fast_secret_clients,
    hashing_client_secrets,
)
from tests.api_helpers import asgi_post, db_snapshot
from tests.live_server import Uvicorn, run_python, server_database
from toolhub import passwords
from toolhub.login_gate import DOORS, door_of
from tools_app.kernel.limits import PASSWORD_HASH_NICENESS
from tools_app.models import ApiToken

PASSWORD = "pw-123456!"  # the root conftest's make_user default
BUSY_MESSAGE = (
    "Too many password checks at once on this server (at most 1 at a time: TOOLHUB_PASSWORD_HASHES_PER_MACHINE). "
    "Retry in 1 s."
)
BUSY_DETAILS = {"retry_after": 1, "limit": 1, "setting": "TOOLHUB_PASSWORD_HASHES_PER_MACHINE"}


class FastPBKDF2(passwords.PBKDF2PasswordHasher):
    """The guarded production hasher with few iterations, so that the suite stays fast."""

    iterations = 1000


@pytest.fixture
def guarded_hashing(settings, owner):
    """The guarded hasher in use, `owner`'s password stored with it."""
    settings.PASSWORD_HASHERS = [f"{__name__}.FastPBKDF2", HASHER_PATH]
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

    run = passwords._HashThreads.run

    def spy_run(self, function, *args, **kwargs):
        # The request's thread, handing its hash to the hashing thread (whose own connections are always
        # empty): ("submit", holds) says whether the request still held a connection it could give back.
        if not getattr(self._local, "hashing", False):
            in_memory = connection.vendor == "sqlite" and connection.is_in_memory_db()
            events.append(("submit", connection.connection is not None and not in_memory))
        return run(self, function, *args, **kwargs)

    monkeypatch.setattr(wrapper, "close", spy_close)
    monkeypatch.setattr(hashers, "pbkdf2", spy_pbkdf2)
    monkeypatch.setattr(passwords._HashThreads, "run", spy_run)
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
    assert [holds for kind, holds in hash_events if kind == "submit"] == [False]
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
    assert [kind for kind, _ in hash_events] == ["submit", "hash"]


@pytest.fixture
def slots_taken(settings):
    """Every hashing slot of the machine held by another thread until the test ends, or until
    `slots_taken.release()`."""
    settings.TOOLHUB_PASSWORD_HASHES_PER_MACHINE = 1
    holding, done = threading.Event(), threading.Event()

    def hold():
        with passwords.hash_slot():
            holding.set()
            done.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(5)

    class Held:
        @staticmethod
        def release() -> None:
            done.set()
            thread.join()

    yield Held
    Held.release()


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
        "message": BUSY_MESSAGE,
        "details": BUSY_DETAILS,
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
    settings.TOOLHUB_PASSWORD_HASHES_PER_MACHINE = 1
    assert [login(password=p).status_code for p in ("wrong", PASSWORD, "wrong", PASSWORD)] == [400, 200, 400, 200]
    assert passwords.slots_in_use() == 0


@pytest.mark.django_db(transaction=True)
def test_a_hash_runs_at_the_lowest_cpu_priority_and_the_request_thread_does_not(guarded_hashing, monkeypatch):
    """The hash runs in the hashing thread at niceness 19, so other requests get the cores first; the
    request's own thread keeps its priority, and the login's outcome is the same."""
    seen: dict[str, tuple[str, int]] = {}
    pbkdf2 = hashers.pbkdf2

    def priority() -> tuple[str, int]:
        return threading.current_thread().name, os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def spy_pbkdf2(*args, **kwargs):
        seen["hash"] = priority()
        return pbkdf2(*args, **kwargs)

    monkeypatch.setattr(hashers, "pbkdf2", spy_pbkdf2)
    # when
    response = login("owner", PASSWORD)
    # then
    assert response.status_code == 200
    name, niceness = seen["hash"]
    assert name.startswith("password-hash")
    assert niceness == 19
    assert priority()[1] == os.getpriority(os.PRIO_PROCESS, 0) < 19
    assert ApiToken.objects.count() == 1


#
# The login gate: the slot is the machine's, taken before Django runs
#


@pytest.fixture
def gated(monkeypatch):
    """toolhub.asgi's stack for the login endpoints (body cap, login gate, Django), with a record of the
    requests that reached Django."""
    from django.core.asgi import get_asgi_application

    from toolhub.login_gate import gate_hashes
    from toolhub.request_limits import cap_request_body

    django_app = get_asgi_application()
    reached: list[str] = []

    async def recording(scope, receive, send):
        reached.append(scope["path"])
        await django_app(scope, receive, send)

    app = cap_request_body(gate_hashes(recording))
    app.reached = reached
    return app


@pytest.fixture
def slot_held_by_another_process(settings, tmp_path):
    """The machine's only slot held by another process (as another uvicorn worker would) until the test
    ends."""
    settings.TOOLHUB_PASSWORD_HASHES_PER_MACHINE = 1
    settings.TOOLHUB_PASSWORD_HASH_LOCK_DIR = str(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys\n"
            f"fd = os.open({str(tmp_path / 'slot-0.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline() == "held\n"
    yield
    holder.stdin.close()
    holder.wait(10)


def gated_login(app, username: str, password: str, *, client: str = "127.0.0.1", pieces: int = 1):
    """POST /api/auth/token/ to the ASGI `app`, the JSON body in `pieces` chunks: asgi_post's answer."""
    body = json.dumps({"username": username, "password": password}).encode()
    size = -(-len(body) // pieces)
    chunks = [body[start : start + size] for start in range(0, len(body), size)]
    length = [(b"content-length", str(len(body)).encode())]
    return asgi_post(app, "/api/auth/token/", chunks, length, client=client)


@pytest.mark.django_db(transaction=True)
def test_the_gate_refuses_a_login_before_django_while_another_process_hashes(
    guarded_hashing, hash_events, gated, slot_held_by_another_process
):
    """Another worker process holds the machine's only slot: a login is refused 429 with Retry-After: 1 by
    the gate, Django never sees it (no thread, no query), nothing is hashed, written or counted as a
    failure."""
    hash_events.clear()
    before = db_snapshot()
    # when
    status, body, read, headers = gated_login(gated, "owner", "wrong")
    # then
    assert status == 429
    assert headers["retry-after"] == "1"
    assert json.loads(body) == {"error": "RATE_LIMITED", "message": BUSY_MESSAGE, "details": BUSY_DETAILS}
    assert gated.reached == []
    assert hash_events == []
    assert db_snapshot() == before
    assert not AccessAttempt.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_gate_answers_the_admin_login_with_a_page(guarded_hashing, gated, slot_held_by_another_process):
    """The admin login form is behind the same gate: a short 429 page, no session, no attempt recorded."""
    from django.contrib.sessions.models import Session

    form = f"username=owner&password={PASSWORD}&next=/admin/".encode()
    form_headers = [(b"content-type", b"application/x-www-form-urlencoded"), (b"content-length", b"%d" % len(form))]
    status, body, _, headers = asgi_post(gated, "/admin/login/", [form], form_headers)
    assert status == 429
    assert headers["retry-after"] == "1"
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert b"Too many password checks at once on this server" in body
    assert gated.reached == []
    assert not Session.objects.exists()
    assert not AccessAttempt.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_gate_reads_the_body_first_hashes_in_its_slot_and_gives_it_back(guarded_hashing, gated, monkeypatch):
    """No slot is held while the body arrives (a slow client holds only its own connection); the hash runs
    inside the slot the gate took (with one slot, a second take would have been a 429); the slot is free
    again by the time the answer starts."""
    seen: dict[str, int] = {}
    pbkdf2 = hashers.pbkdf2

    def spy_pbkdf2(*args, **kwargs):
        seen["while hashing"] = passwords.slots_in_use()
        return pbkdf2(*args, **kwargs)

    monkeypatch.setattr(hashers, "pbkdf2", spy_pbkdf2)

    async def watching(scope, receive, send):
        async def watched_receive():
            seen.setdefault("while reading", passwords.slots_in_use())
            return await receive()

        await gated(scope, watched_receive, send)

    # when: the body comes in two pieces
    status, answer, read, _ = gated_login(watching, "owner", PASSWORD, pieces=2)
    # then
    assert status == 200, answer
    assert json.loads(answer)["token"].startswith("tht_")
    assert read == 2
    assert seen == {"while reading": 0, "while hashing": 1}
    assert passwords.slots_in_use() == 0
    assert ApiToken.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_gate_counts_each_admitted_login_once(guarded_hashing, gated, rate_limited, slots_taken):
    """A login refused for want of a slot is not counted (it cost nothing); one that gets the slot is counted
    in its address's token bucket by the gate, and the view's throttle does not count it again; an address
    over its rate gives the slot back; another address has its own bucket."""
    rate_limited(token="2/minute")
    # when: three logins refused for want of a slot
    busy = [gated_login(gated, "owner", "wrong", client="10.1.0.1") for _ in range(3)]
    # then
    assert [answer[0] for answer in busy] == [429, 429, 429]
    assert all(json.loads(answer[1])["message"] == BUSY_MESSAGE for answer in busy)
    # when: the slot is free again
    slots_taken.release()
    wrong = gated_login(gated, "owner", "wrong", client="10.1.0.1")
    right = gated_login(gated, "owner", PASSWORD, client="10.1.0.1")
    over = gated_login(gated, "owner", PASSWORD, client="10.1.0.1")
    elsewhere = gated_login(gated, "owner", PASSWORD, client="10.1.0.2")
    # then: 2/minute admitted two from 10.1.0.1 (counted once each), the third is over its rate
    assert (wrong[0], right[0], over[0], elsewhere[0]) == (400, 200, 429, 200)
    assert json.loads(over[1])["details"]["scope"] == "token"
    assert int(over[3]["retry-after"]) in rate_limited.retry_after_now()
    assert passwords.slots_in_use() == 0
    assert ApiToken.objects.count() == 2
    assert gated.reached == ["/api/auth/token/"] * 3


#
# Every other endpoint that can hash a password or a client secret goes through the same gate
#

CLIENT_SECRET = "the-client-secret-" + "s" * 30
FORM = b"application/x-www-form-urlencoded"


def make_confidential_client(client_secret: str, name: str = "Confidential"):
    application = get_application_model()
    return application.objects.create(
        name=name,
        client_type=application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="https://client.example/cb",
        client_secret=client_secret,
    )


@pytest.fixture
def confidential_client(guarded_hashing):
    """A confidential OAuth client registered before client secrets had their own hasher: its secret (not of
    the generated shape) stored with the guarded password hasher (PBKDF2)."""
    return make_confidential_client(hashers.make_password(CLIENT_SECRET))


@pytest.fixture
def new_client(guarded_hashing):
    """A confidential OAuth client as made now: a generated secret, stored with the fast client-secret
    hasher; the client and its secret."""
    secret = ClientSecretGenerator().hash()
    return make_confidential_client(secret, name="New"), secret


@pytest.fixture
def admin_session(guarded_hashing, client):
    """`owner` made a superuser and logged in to the admin: the session cookie header of that login."""
    guarded_hashing.is_staff = guarded_hashing.is_superuser = True
    guarded_hashing.save(update_fields=["is_staff", "is_superuser"])
    client.force_login(guarded_hashing)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


def oauth_rows() -> dict[str, list[dict]]:
    """Every OAuth client and token, and every user, field by field: what a refused request must not change."""
    models = {"clients": get_application_model(), "tokens": get_access_token_model(), "users": get_user_model()}
    return {name: list(model.objects.order_by("pk").values()) for name, model in models.items()}


def basic(client_id: str, secret: str) -> tuple[bytes, bytes]:
    return (b"authorization", b"Basic " + base64.b64encode(f"{client_id}:{secret}".encode()))


def test_the_doors_are_exactly_the_endpoints_that_can_hash():
    """The gate's table: every POST that can make the server hash, and nothing else (a GET, a neighbour)."""
    gated = [
        "/api/auth/token/",
        "/admin/login/",
        "/oauth/token/",
        "/oauth/revoke/",
        "/admin/password_change/",
        "/admin/auth/user/add/",
        "/admin/auth/user/7/password/",
    ]
    assert [door_of("POST", path) is not None for path in gated] == [True] * len(gated)
    assert len({door_of("POST", path) for path in gated}) == len(DOORS) == 4
    not_gated = [
        # a client's secret is hashed with the fast client-secret hasher: registering or saving one never hashes slowly
        ("POST", "/oauth/register/"),
        ("POST", "/admin/oauth_app/client/add/"),
        ("POST", "/admin/oauth_app/client/7/change/"),
        ("GET", "/admin/login/"),
        ("GET", "/admin/password_change/"),
        ("POST", "/admin/password_change/done/"),
        ("POST", "/admin/auth/user/7/change/"),
        ("POST", "/admin/auth/user/7/password/x/"),
        ("POST", "/oauth/register/abc/"),
        ("POST", "/oauth/authorize/"),
        ("POST", "/api/auth/tokens/"),
        ("POST", "/api/tables/"),
    ]
    assert [door_of(method, path) for method, path in not_gated] == [None] * len(not_gated)


DOOR_CASES = {
    # name: (path, body, extra headers, content type)
    "oauth-token-secret-in-body": (
        "/oauth/token/",
        b"grant_type=authorization_code&code=x&redirect_uri=https%3A%2F%2Fclient.example%2Fcb&client_id={id}"
        b"&client_secret=wrong&code_verifier=" + b"v" * 43,
        [],
        FORM,
    ),
    "oauth-token-basic": ("/oauth/token/", b"grant_type=refresh_token&refresh_token=x", "basic", FORM),
    "oauth-revoke-secret-in-body": ("/oauth/revoke/", b"token=x&client_id={id}&client_secret=wrong", [], FORM),
    "oauth-revoke-basic": ("/oauth/revoke/", b"token=x", "basic", FORM),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(DOOR_CASES))
def test_the_gate_refuses_every_oauth_request_that_would_hash_before_django(
    confidential_client, hash_events, gated, slot_held_by_another_process, monkeypatch, case
):
    """Another process holds the machine's only slot: a token or revocation request that carries a client
    secret not of the generated shape (in the body or as HTTP Basic), which may be checked against a slow
    stored hash, is refused 429 RATE_LIMITED with Retry-After: 1 before Django runs: nothing hashed, queried or
    written. Its client unknown to the worker, the worker reads the marks again, in the background (recorded
    here, not run: test_a_mark_reaches_another_worker_through_the_database runs it)."""
    worker = FastSecretClients()
    reads: list[str] = []
    monkeypatch.setattr(worker, "read", lambda: reads.append("read"))
    monkeypatch.setattr("toolhub.login_gate.fast_secret_clients", worker)
    path, body, headers, content_type = DOOR_CASES[case]
    body = body.replace(b"{id}", confidential_client.client_id.encode())
    if headers == "basic":
        headers = [basic(confidential_client.client_id, "wrong")]
    hash_events.clear()
    before, rows_before = db_snapshot(), oauth_rows()
    # when
    status, answer, _, answer_headers = asgi_post(gated, path, [body], headers, content_type=content_type)
    # then
    assert status == 429
    assert answer_headers["retry-after"] == "1"
    assert answer_headers["content-type"] == "application/json"
    assert json.loads(answer) == {"error": "RATE_LIMITED", "message": BUSY_MESSAGE, "details": BUSY_DETAILS}
    assert gated.reached == []
    assert hash_events == []
    assert reads == ["read"]
    assert db_snapshot() == before
    assert oauth_rows() == rows_before


NEW_PASSWORD = "N3w-pass-word-1"
ADMIN_CASES = {
    "password-change": (
        "/admin/password_change/",
        f"old_password={PASSWORD}&new_password1={NEW_PASSWORD}&new_password2={NEW_PASSWORD}",
    ),
    "user-add": (
        "/admin/auth/user/add/",
        f"username=newbie&password1={NEW_PASSWORD}&password2={NEW_PASSWORD}&usable_password=true",
    ),
    "user-set-password": ("/admin/auth/user/{user}/password/", f"password1={NEW_PASSWORD}&password2={NEW_PASSWORD}"),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", list(ADMIN_CASES))
def test_the_gate_refuses_every_admin_form_that_would_hash_before_django(
    confidential_client, admin_session, hash_events, gated, slot_held_by_another_process, case
):
    """A signed-in administrator's password change, new user and password reset each cost a hash: with every
    slot taken, a short 429 page with Retry-After: 1 before Django runs; the password, the users and the
    clients are unchanged and nothing else is written."""
    path, form = ADMIN_CASES[case]
    path = path.format(user=get_user_model().objects.get().pk, client=confidential_client.pk)
    body = form.encode()
    hash_events.clear()
    before, rows_before, sessions = db_snapshot(), oauth_rows(), list(Session.objects.values())
    # when
    status, answer, _, headers = asgi_post(gated, path, [body], [admin_session], content_type=FORM)
    # then
    assert status == 429
    assert headers["retry-after"] == "1"
    assert headers["content-type"] == "text/html; charset=utf-8"
    assert b"Too many password checks at once on this server" in answer
    assert gated.reached == []
    assert hash_events == []
    assert db_snapshot() == before
    assert oauth_rows() == rows_before
    assert list(Session.objects.values()) == sessions


@pytest.mark.django_db(transaction=True)
def test_requests_that_cannot_hash_pass_the_gate_while_every_slot_is_taken(
    confidential_client, hash_events, gated, slot_held_by_another_process
):
    """The gate costs nothing to requests that will not hash: a token request without a client secret (a
    public client's; a confidential client's id alone is refused without hashing) and an admin form posted
    without a session reach Django and are answered by it, never 429."""
    hash_events.clear()
    public = b"grant_type=refresh_token&refresh_token=unknown&client_id=someone"
    id_alone = b"grant_type=refresh_token&refresh_token=unknown&client_id=" + confidential_client.client_id.encode()
    rows_before = oauth_rows()
    # when
    answers = [
        asgi_post(gated, "/oauth/token/", [public], [], content_type=FORM),
        asgi_post(gated, "/oauth/token/", [id_alone], [], content_type=FORM),
        asgi_post(gated, "/admin/password_change/", [b"old_password=x"], [], content_type=FORM),
    ]
    # then
    assert [(status, json.loads(body)["error"]) for status, body, _, _ in answers[:2]] == [
        (401, "invalid_client"),
        (401, "invalid_client"),
    ]
    assert answers[2][0] == 403  # Django's own answer (no CSRF cookie without a session), not the gate's 429
    assert gated.reached == ["/oauth/token/"] * 2 + ["/admin/password_change/"]
    assert [event for event in hash_events if event[0] != "close"] == []
    assert oauth_rows() == rows_before


@pytest.mark.django_db(transaction=True)
def test_a_client_secret_is_hashed_in_the_gates_slot_and_counted_once(
    confidential_client, gated, rate_limited, monkeypatch
):
    """A revocation with an old client's right secret (stored with PBKDF2): the hash runs inside the slot the
    gate took (one slot: a second take would be a 429), the slot is free again after, and the secret is stored
    again with the fast hasher; the gate counts the request in its address's OAuth bucket and the view does
    not count it again. The second revocation hashes nothing slowly and takes no slot (the client is marked
    fast): the view counts it, and refuses the third, over the address's rate."""
    rate_limited(token="2/minute")
    seen: list[int] = []
    pbkdf2 = hashers.pbkdf2

    def spy_pbkdf2(*args, **kwargs):
        seen.append(passwords.slots_in_use())
        return pbkdf2(*args, **kwargs)

    monkeypatch.setattr(hashers, "pbkdf2", spy_pbkdf2)
    body = f"token=unknown&client_id={confidential_client.client_id}&client_secret={CLIENT_SECRET}".encode()
    # when
    answers = [asgi_post(gated, "/oauth/revoke/", [body], [], content_type=FORM, client="10.2.0.1") for _ in range(3)]
    # then: RFC 7009 answers 200 for a token it does not know, once the client is authenticated
    assert [answer[0] for answer in answers] == [200, 200, 429]
    assert json.loads(answers[2][1])["details"]["scope"] == "token"
    assert seen == [1]
    confidential_client.refresh_from_db()
    assert confidential_client.client_secret.startswith("client_secret_sha256$")
    assert passwords.slots_in_use() == 0
    assert gated.reached == ["/oauth/revoke/"] * 3


@pytest.mark.django_db(transaction=True)
def test_a_registration_passes_the_gate_while_every_slot_is_taken(
    guarded_hashing, hash_events, gated, slot_held_by_another_process
):
    """During a login burst (another process holds the machine's only slot) an MCP client still registers:
    its secret is hashed with the fast client-secret hasher, so the gate takes no slot and nothing hashes
    slowly; the client is stored and its answered secret authenticates."""
    hash_events.clear()
    registration = {
        "redirect_uris": ["https://client.example/cb"],
        "client_name": "burst",
        "token_endpoint_auth_method": "client_secret_basic",
    }
    # when
    status, answer, _, _ = asgi_post(gated, "/oauth/register/", [json.dumps(registration).encode()], [])
    # then
    assert status == 201, answer
    body = json.loads(answer)
    stored = get_application_model().objects.get()
    assert (stored.client_id, stored.name) == (body["client_id"], "burst")
    assert stored.client_secret.startswith("client_secret_sha256$")
    assert gated.reached == ["/oauth/register/"]
    assert [event for event in hash_events if event[0] != "close"] == []
    # the answered secret authenticates, still during the burst
    revoke = f"token=unknown&client_id={body['client_id']}&client_secret={body['client_secret']}".encode()
    assert asgi_post(gated, "/oauth/revoke/", [revoke], [], content_type=FORM)[0] == 200


@pytest.mark.django_db(transaction=True)
def test_a_generated_client_secret_is_checked_while_every_slot_is_taken(
    new_client, hash_events, gated, slot_held_by_another_process
):
    """During a burst, a client made now (generated secret, fast hash) authenticates at the token endpoint
    with its right secret (in the body or as HTTP Basic: the refresh token is then unknown, 400
    invalid_grant), and a wrong secret of the same shape is 401 invalid_client; the gate takes no slot for
    either, nothing hashes slowly and nothing is written."""
    client, secret = new_client
    wrong = ClientSecretGenerator().hash()
    refresh = b"grant_type=refresh_token&refresh_token=unknown"
    in_body = refresh + f"&client_id={client.client_id}&client_secret=".encode()
    hash_events.clear()
    before, rows_before = db_snapshot(), oauth_rows()
    # when
    answers = [
        asgi_post(gated, "/oauth/token/", [in_body + secret.encode()], [], content_type=FORM),
        asgi_post(gated, "/oauth/token/", [refresh], [basic(client.client_id, secret)], content_type=FORM),
        asgi_post(gated, "/oauth/token/", [in_body + wrong.encode()], [], content_type=FORM),
        asgi_post(gated, "/oauth/token/", [refresh], [basic(client.client_id, wrong)], content_type=FORM),
    ]
    # then
    assert [(status, json.loads(body)["error"]) for status, body, _, _ in answers] == [
        (400, "invalid_grant"),
        (400, "invalid_grant"),
        (401, "invalid_client"),
        (401, "invalid_client"),
    ]
    assert gated.reached == ["/oauth/token/"] * 4
    assert [event for event in hash_events if event[0] != "close"] == []
    assert db_snapshot() == before
    assert oauth_rows() == rows_before


@pytest.mark.django_db(transaction=True)
def test_a_generated_shape_secret_is_never_checked_against_a_slow_hash(
    confidential_client, hash_events, gated, slot_held_by_another_process
):
    """A secret of the generated shape passes the gate without a slot; sent for an old client (secret stored
    with PBKDF2), it cannot be that client's (every generated secret is stored with the fast hasher): 401
    invalid_client without any hash, nothing written."""
    forged = ClientSecretGenerator().hash()
    body = f"token=x&client_id={confidential_client.client_id}&client_secret={forged}".encode()
    hash_events.clear()
    before, rows_before = db_snapshot(), oauth_rows()
    # when
    status, answer, _, _ = asgi_post(gated, "/oauth/revoke/", [body], [], content_type=FORM)
    # then
    assert (status, json.loads(answer)["error"]) == (401, "invalid_client")
    assert gated.reached == ["/oauth/revoke/"]
    assert [event for event in hash_events if event[0] != "close"] == []
    assert db_snapshot() == before
    assert oauth_rows() == rows_before


@pytest.fixture
def held_slot(settings, tmp_path):
    """take() holds the machine's only slot as another worker would (its own lock on the slot file), until
    give_back() or the end of the test."""
    settings.TOOLHUB_PASSWORD_HASHES_PER_MACHINE = 1
    settings.TOOLHUB_PASSWORD_HASH_LOCK_DIR = str(tmp_path)
    held: list[int] = []

    class Held:
        def take(self) -> None:
            descriptor = passwords._try_lock(tmp_path / "slot-0.lock")
            assert descriptor is not None
            held.append(descriptor)

        def give_back(self) -> None:
            os.close(held.pop())

    yield Held()
    for descriptor in held:
        os.close(descriptor)


@pytest.mark.django_db(transaction=True)
def test_an_old_client_takes_a_slot_until_its_secret_is_stored_fast_then_none(
    confidential_client, hash_events, gated, held_slot
):
    """An old client (secret not of the generated shape, stored with PBKDF2): while every slot is taken its
    request is refused by the gate, nothing hashed or written, the client not marked. Once it authenticated
    (slot free: the secret checked with PBKDF2 and stored again with the fast hasher), the gate knows it
    without a query or a hash: while every slot is taken again, its right secret authenticates (200) and a
    wrong one is 401 invalid_client, neither hashing slowly nor writing anything."""
    fast_secret_clients.forget()
    client_id = confidential_client.client_id
    right = f"token=unknown&client_id={client_id}&client_secret={CLIENT_SECRET}".encode()
    wrong = f"token=unknown&client_id={client_id}&client_secret=not-the-secret-{'w' * 20}".encode()
    held_slot.take()
    hash_events.clear()
    before, rows_before = db_snapshot(), oauth_rows()
    # when: before its first success
    status, answer, _, _ = asgi_post(gated, "/oauth/revoke/", [right], [], content_type=FORM)
    # then: a slot needed, none free
    assert (status, json.loads(answer)["error"]) == (429, "RATE_LIMITED")
    assert gated.reached == []
    # nothing hashed (the only connection used: the background read of the marks, given back)
    assert [event for event in hash_events if event[0] != "close"] == []
    assert db_snapshot() == before
    assert oauth_rows() == rows_before
    assert not fast_secret_clients.knows(client_id)
    # when: a slot free, the right secret
    held_slot.give_back()
    assert asgi_post(gated, "/oauth/revoke/", [right], [], content_type=FORM)[0] == 200
    # then
    confidential_client.refresh_from_db()
    assert confidential_client.client_secret.startswith("client_secret_sha256$")
    assert fast_secret_clients.knows(client_id)
    # when: every slot taken again
    held_slot.take()
    hash_events.clear()
    before, rows_before = db_snapshot(), oauth_rows()
    answers = [asgi_post(gated, "/oauth/revoke/", [body], [], content_type=FORM) for body in (right, wrong)]
    basic_answers = [
        asgi_post(gated, "/oauth/revoke/", [b"token=unknown"], [basic(client_id, secret)], content_type=FORM)[0]
        for secret in (CLIENT_SECRET, "not-the-secret")
    ]
    # then: no slot taken, nothing hashed slowly, nothing written
    assert [(status, body) for status, body, _, _ in answers] == [
        (200, b""),
        (401, b'{"error": "invalid_client"}'),
    ]
    assert basic_answers == [200, 401]
    assert gated.reached == ["/oauth/revoke/"] * 5
    assert [event for event in hash_events if event[0] != "close"] == []
    assert db_snapshot() == before
    assert oauth_rows() == rows_before


@pytest.mark.django_db(transaction=True)
def test_a_wrong_old_secret_marks_nothing_and_another_client_still_takes_a_slot(confidential_client, gated, held_slot):
    """A wrong secret for an old client marks nothing (slot free: checked with PBKDF2, 401, the stored hash
    unchanged); a marked client lends nothing to another: a request naming two client ids, or an unmarked
    one, takes a slot (refused while every slot is taken)."""
    fast_secret_clients.forget()
    other = make_confidential_client(hashers.make_password(CLIENT_SECRET), name="Other")
    client_id = confidential_client.client_id
    wrong = f"token=unknown&client_id={client_id}&client_secret=not-the-secret-{'w' * 20}".encode()
    stored = confidential_client.client_secret
    # when
    status, _, _, _ = asgi_post(gated, "/oauth/revoke/", [wrong], [], content_type=FORM)
    # then
    assert status == 401
    confidential_client.refresh_from_db()
    assert confidential_client.client_secret == stored
    assert confidential_client.old_secret_fast_at is None
    assert not fast_secret_clients.knows(client_id)
    # when: the first client marked, every slot taken
    fast_secret_clients.mark(client_id)
    held_slot.take()
    rows_before = oauth_rows()
    two_ids = f"token=x&client_id={client_id}&client_id={other.client_id}&client_secret={CLIENT_SECRET}".encode()
    unmarked = f"token=x&client_id={other.client_id}&client_secret={CLIENT_SECRET}".encode()
    answers = [
        asgi_post(gated, "/oauth/revoke/", [two_ids], [], content_type=FORM)[0],
        asgi_post(gated, "/oauth/revoke/", [unmarked], [], content_type=FORM)[0],
        asgi_post(gated, "/oauth/revoke/", [b"token=x"], [basic(other.client_id, CLIENT_SECRET)], content_type=FORM)[0],
    ]
    # then
    assert answers == [429, 429, 429]
    assert gated.reached == ["/oauth/revoke/"]
    assert oauth_rows() == rows_before


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("redis_url", ["", "redis://127.0.0.1:6379/0"], ids=["without-redis", "with-redis"])
def test_a_mark_reaches_another_worker_through_the_database(
    confidential_client, gated, held_slot, monkeypatch, settings, redis_url
):
    """Two workers' state with only the database between them: the worker that checked an old client's secret
    (this process's fast_secret_clients) marks the client in its row; another worker (a FastSecretClients of
    its own, serving the gate) does not know it at first, so with every slot taken its first request is
    refused 429 while it reads the marks in a thread of its own (the gate's path queries nothing); its next
    requests, right or wrong secret, take no slot and hash nothing slowly. The same with or without Redis."""
    if redis_url:
        try:
            redis.Redis.from_url(redis_url).ping()
        except redis.RedisError:
            pytest.skip("no Redis on 127.0.0.1:6379")
        settings.REDIS_URL = redis_url
        settings.TOOLHUB_RATE_LIMIT_KEY_PREFIX = f"test-fast-secrets-{os.getpid()}-{time.monotonic_ns()}"
    fast_secret_clients.forget()
    other_worker = FastSecretClients()
    reads: list[str] = []
    read = other_worker.read

    def recording_read() -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            reads.append("off the event loop")
        else:
            reads.append("on the event loop")
        read()

    monkeypatch.setattr(other_worker, "read", recording_read)
    client_id = confidential_client.client_id
    right = f"token=unknown&client_id={client_id}&client_secret={CLIENT_SECRET}".encode()
    wrong = f"token=unknown&client_id={client_id}&client_secret=not-the-secret-{'w' * 20}".encode()
    # when: the first worker checks the secret (a slot free)
    assert asgi_post(gated, "/oauth/revoke/", [right], [], content_type=FORM)[0] == 200
    # then: its row holds the fast hash and the mark
    confidential_client.refresh_from_db()
    assert confidential_client.client_secret.startswith("client_secret_sha256$")
    assert confidential_client.old_secret_fast_at is not None
    assert fast_secret_clients.knows(client_id)
    # when: the other worker's gate, every slot taken
    monkeypatch.setattr("toolhub.login_gate.fast_secret_clients", other_worker)
    held_slot.take()
    gated.reached.clear()
    rows_before = oauth_rows()
    first = asgi_post(gated, "/oauth/revoke/", [right], [], content_type=FORM)[0]
    later = [asgi_post(gated, "/oauth/revoke/", [body], [], content_type=FORM)[0] for body in (right, wrong)]
    # then: the first refused while the marks were read once, off the gate's thread; then known
    assert first == 429
    assert reads == ["off the event loop"]
    assert later == [200, 401]
    assert gated.reached == ["/oauth/revoke/"] * 2
    assert other_worker.knows(client_id)
    assert oauth_rows() == rows_before


@pytest.mark.django_db(transaction=True)
def test_a_client_rehashed_before_the_marks_were_kept_is_marked_on_its_next_success(guarded_hashing, gated):
    """A client whose old secret was already stored fast, but not marked in the database (rehashed before the
    marks were kept there): its next success marks it, once; a wrong secret marks nothing."""
    fast_secret_clients.forget()
    with hashing_client_secrets():
        stored = hashers.make_password(CLIENT_SECRET, hasher="client_secret_sha256")
    old = make_confidential_client(stored)
    client_id = old.client_id
    wrong = f"token=unknown&client_id={client_id}&client_secret=not-the-secret-{'w' * 20}".encode()
    right = f"token=unknown&client_id={client_id}&client_secret={CLIENT_SECRET}".encode()
    # when
    assert asgi_post(gated, "/oauth/revoke/", [wrong], [], content_type=FORM)[0] == 401
    old.refresh_from_db()
    # then
    assert old.old_secret_fast_at is None
    assert not fast_secret_clients.knows(client_id)
    # when
    assert asgi_post(gated, "/oauth/revoke/", [right], [], content_type=FORM)[0] == 200
    old.refresh_from_db()
    marked_at = old.old_secret_fast_at
    fast_secret_clients.forget()
    assert asgi_post(gated, "/oauth/revoke/", [right], [], content_type=FORM)[0] == 200
    old.refresh_from_db()
    # then: marked at the first success, not again; the stored hash unchanged
    assert marked_at is not None
    assert old.old_secret_fast_at == marked_at
    assert old.client_secret == stored


def test_the_marks_are_read_at_most_once_a_second():
    """Requests naming clients a worker does not know start one read of the marks, not one each: another within
    FastSecretClients.REFRESH_SECONDS starts none."""
    worker = FastSecretClients()
    reads: list[str] = []
    worker.read = lambda: reads.append("read")  # type: ignore[method-assign]

    async def ask() -> list[bool]:
        answers = [worker.knows(f"client-{number}") for number in range(50)]
        await worker._refresh
        return answers

    assert asyncio.run(ask()) == [False] * 50
    assert reads == ["read"]


#
# A hash outside a request waits for a slot; a request is refused at once
#


@pytest.mark.django_db(transaction=True)
def test_a_hash_outside_a_request_waits_for_the_slot(guarded_hashing, settings, tmp_path):
    """createsuperuser, changepassword or a seeding script while another process hashes: the hash waits for
    the slot (here 0.3 s) instead of being refused, and the password is set."""
    settings.TOOLHUB_PASSWORD_HASHES_PER_MACHINE = 1
    settings.TOOLHUB_PASSWORD_HASH_LOCK_DIR = str(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, time\n"
            f"fd = os.open({str(tmp_path / 'slot-0.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "print('held', flush=True)\n"
            "time.sleep(0.3)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline() == "held\n"
    started = time.monotonic()
    # when
    guarded_hashing.set_password("a-new-password-1")
    guarded_hashing.save(update_fields=["password"])
    # then
    waited = time.monotonic() - started
    holder.wait(10)
    assert 0.1 < waited < 5
    guarded_hashing.refresh_from_db()
    assert guarded_hashing.check_password("a-new-password-1")
    assert passwords.slots_in_use() == 0


@pytest.mark.django_db(transaction=True)
def test_a_hash_outside_a_request_gives_up_after_the_wait_with_a_clear_message(
    guarded_hashing, settings, slot_held_by_another_process
):
    """The slot stays taken past TOOLHUB_PASSWORD_HASH_WAIT_SECONDS: PasswordSlotTimeout, saying what was
    waited for and which settings to raise; nothing was hashed or stored."""
    settings.TOOLHUB_PASSWORD_HASH_WAIT_SECONDS = 0.3
    stored = guarded_hashing.password
    started = time.monotonic()
    # when
    with pytest.raises(passwords.PasswordSlotTimeout) as refused:
        guarded_hashing.set_password("a-new-password-1")
    # then
    assert 0.3 <= time.monotonic() - started < 3
    assert refused.value.message == (
        "No password-hashing slot came free within 0.3 s (TOOLHUB_PASSWORD_HASH_WAIT_SECONDS): this machine runs "
        "at most 1 password hash(es) at a time (TOOLHUB_PASSWORD_HASHES_PER_MACHINE) and every slot stayed busy, "
        "most likely with logins being refused or checked. Try again, or raise TOOLHUB_PASSWORD_HASH_WAIT_SECONDS "
        "or TOOLHUB_PASSWORD_HASHES_PER_MACHINE."
    )
    wait_setting = "TOOLHUB_PASSWORD_HASH_WAIT_SECONDS"
    assert refused.value.details == {**BUSY_DETAILS, "waited_seconds": 0.3, "wait_setting": wait_setting}
    guarded_hashing.refresh_from_db()
    assert guarded_hashing.password == stored


@pytest.mark.django_db
def test_a_request_does_not_wait_for_a_slot(guarded_hashing, settings, slots_taken):
    """Served by Django without the gate (the test client, WSGI), a login with every slot taken is still
    refused at once, not after the wait a management command would make."""
    settings.TOOLHUB_PASSWORD_HASH_WAIT_SECONDS = 5
    started = time.monotonic()
    response = login("owner", "wrong")
    assert response.status_code == 429
    assert time.monotonic() - started < 2
    assert response.json()["message"] == BUSY_MESSAGE


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
        # The victim's password stored at the production cost, at normal priority (server_database's); the
        # server hashes at the production priority (the setting's default, niceness 19). The other user signs in
        # with a token only: no password to hash.
        token = run_python(
            env,
            "from django.contrib.auth import get_user_model\n"
            "from tools_app.services import api_token_issue\n"
            "User = get_user_model()\n"
            "User.objects.create_user('victim', password='victim-password-1')\n"
            "other = User.objects.create_user('other')\n"
            "print(api_token_issue(user=other, via='test')[1])",
        )
        with Uvicorn({**env, "TOOLHUB_PASSWORD_HASH_NICENESS": str(PASSWORD_HASH_NICENESS.default)}) as server:

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
