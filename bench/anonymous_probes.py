"""The anonymous and storage probes of the attack on a production-like server, once each: does each still hold?

    REDIS_URL=redis://127.0.0.1:6379/0 python bench/anonymous_probes.py \
        --database-url postgres://postgres@127.0.0.1:5432/postgres [--database-name NAME] [--uris 600000]

Creates a database of its own on that server (dropped at the end), migrates it, seeds an owner with an API
token and an MCP instance, and starts `uvicorn --workers 2` with DEBUG off and rate limits on (in Redis when
REDIS_URL is set), as login_burst.py does. Then, over HTTP:

- registration over the caps: `POST /oauth/register/` with `--uris` redirect URIs (the attack sent 600,000,
  42.5 MB), with a plain-http non-loopback redirect URI, with the client-credentials grant: each a 400 naming
  what was wrong; the big one as its headers and first 16 KiB only, timing the server's answer (the target:
  < 50 ms): the server answers from the declared length and closes, so a client that sends the whole body
  meets a reset before it could read that answer; no client stored;
- an error for a client nobody approved (`scope=nonexistent`, no code challenge) shown to a logged-in owner
  and to a superuser: a page (400), never a redirect to the registered `https://evil.example/phish`;
- CSV with doubled quotes (`1,"a ""quoted"" , comma"`): one cell; the invalid `1,"x ""y"", z"` refused;
- a 5,000-digit integer in a JSON import: a 400 naming the value, not a 500.

The bursts (bad logins, bad client secrets) are login_burst.py's; the slow-drip metadata document, import
memory and history storage have their own tests and benches (bench/README.md, "Anonymous probes").
Prints one line per probe, `held` or `FAILED`, and exits 1 if any failed.
"""

import argparse
import json
import os
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live_server import Uvicorn, run_python, seed_mcp, server_database  # noqa: E402

EVIL = "https://evil.example/phish"

SEED = """
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from tools_app.services import api_token_issue
User = get_user_model()
owner = User.objects.get(username="prober")
root = User.objects.create_superuser("root", password="root-password-" + "r" * 8)
def session(user):
    store = SessionStore()
    store[SESSION_KEY], store[HASH_SESSION_KEY] = str(user.pk), user.get_session_auth_hash()
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store.create()
    return store.session_key
print(json.dumps({
    "token": api_token_issue(user=owner, via="probe")[1],
    "owner_session": session(owner),
    "root_session": session(root),
}))
"""

COUNT_CLIENTS = """
from oauth2_provider.models import get_application_model
print(get_application_model().objects.count())
"""


def send(method: str, url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=120) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def register(base: str, address: str, **metadata) -> tuple[int, dict, float]:
    document = {"client_name": "probe", "redirect_uris": ["https://client.example/cb"], **metadata}
    body = json.dumps(document).encode()
    started = time.monotonic()
    status, _, answer = send(
        "POST", f"{base}/oauth/register/", body, {"Content-Type": "application/json", "X-Forwarded-For": address}
    )
    return status, json.loads(answer or b"{}"), time.monotonic() - started


def answer_before_the_body(base: str, address: str, body: bytes) -> tuple[bytes, float]:
    """Send a registration's headers (its whole Content-Length) and its first 16 KiB only, then wait for the
    answer: its status line and the seconds it took from the last byte sent."""
    host, port = urlsplit(base).hostname or "127.0.0.1", urlsplit(base).port or 80
    head = (
        f"POST /oauth/register/ HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nX-Forwarded-For: {address}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(head + body[:16384])
        started = time.monotonic()
        try:
            status_line = sock.makefile("rb").readline()
        except TimeoutError:
            status_line = b"(no answer within 10 s)"
    return status_line, time.monotonic() - started


def upload(base: str, token: str, name: str, filename: str, content: bytes, file_format: str) -> tuple[int, dict]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="format"\r\n\r\n{file_format}\r\n'.encode(),
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        f"Content-Type: application/octet-stream\r\n\r\n".encode()
        + content
        + b"\r\n",
        f"--{boundary}--\r\n".encode(),
    ]
    headers = {"Authorization": f"Token {token}", "Content-Type": f"multipart/form-data; boundary={boundary}"}
    status, _, answer = send("POST", f"{base}/api/tables/import/", b"".join(parts), headers)
    return status, json.loads(answer or b"{}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="postgres://... server to create the database on")
    parser.add_argument("--database-name", default=None)
    parser.add_argument("--uris", type=int, default=600_000, help="redirect URIs in the oversized registration")
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.database_url
    results: list[tuple[str, bool, str]] = []

    def probe(name: str, held: bool, detail: str) -> None:
        results.append((name, held, detail))
        print(f"{'held  ' if held else 'FAILED'} {name}: {detail}", flush=True)

    with (
        tempfile.TemporaryDirectory() as directory,
        server_database("probes", Path(directory), secret="p" * 50, name=args.database_name) as env,
    ):
        env.pop("TOOLHUB_DEV", None)
        env["TOOLHUB_RATE_LIMITS_ENABLED"] = "true"
        env["TOOLHUB_PASSWORD_HASH_LOCK_DIR"] = str(Path(directory) / "hash-slots")
        env.setdefault("TOOLHUB_RATE_LIMIT_KEY_PREFIX", f"probes-{os.getpid()}")
        instance = seed_mcp(env, slug="probe", rows=5, user="prober")
        seeded = json.loads(run_python(env, SEED))
        with Uvicorn(env, workers=2) as server:
            base = server.base
            print(f"2 uvicorn workers on {env['DATABASE_URL'].rsplit('/', 1)[-1]}, DEBUG off", flush=True)

            # Registration over the caps: each from an address of its own (10/min per address).
            clients_before = run_python(env, COUNT_CLIENTS)
            uris = [f"https://client.example/cb/{index}" for index in range(args.uris)]
            body = json.dumps({"client_name": "probe", "redirect_uris": uris}).encode()
            status_line, seconds = answer_before_the_body(base, "10.9.0.5", body)
            probe(
                f"registration with {args.uris:,} redirect URIs ({len(body):,} bytes) answered before its body",
                status_line.startswith(b"HTTP/1.1 400"),
                f"{status_line.decode().strip()!r} {seconds * 1000:.1f} ms after the headers and 16 KiB",
            )
            status, answer, _ = register(base, "10.9.0.2", redirect_uris=["http://client.example/cb"])
            probe("registration with a plain-http redirect URI", status == 400, f"{status}: {json.dumps(answer)[:160]}")
            status, answer, _ = register(base, "10.9.0.3", grant_types=["client_credentials"])
            probe(
                "registration with the client-credentials grant", status == 400, f"{status}: {json.dumps(answer)[:160]}"
            )
            clients_after = run_python(env, COUNT_CLIENTS)
            probe(
                "nothing stored by the refused registrations",
                clients_after == clients_before,
                f"clients {clients_before} -> {clients_after}",
            )

            # An error for a client nobody approved: a page, never a redirect to its URI.
            status, evil, _ = register(base, "10.9.0.4", redirect_uris=[EVIL])
            for who in ("owner", "root"):
                for changes in ({"scope": "nonexistent"}, {"code_challenge": None}):
                    params = {
                        "response_type": "code",
                        "client_id": evil.get("client_id", ""),
                        "redirect_uri": EVIL,
                        "state": "s",
                        "scope": "tools:all",
                        "resource": f"{base}/mcp/{instance['slug']}/",
                        "code_challenge": "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
                        "code_challenge_method": "S256",
                        **changes,
                    }
                    query = urlencode({key: value for key, value in params.items() if value is not None})
                    cookie = {"Cookie": f"sessionid={seeded[f'{who}_session']}"}
                    status, headers, _ = send("GET", f"{base}/oauth/authorize/?{query}", None, cookie)
                    location = headers.get("Location", "")
                    probe(
                        f"authorize error ({next(iter(changes))}) for an unapproved client, as {who}",
                        status == 400 and not location,
                        f"{status}{', Location ' + location if location else ', no redirect'}",
                    )

            # CSV as RFC 4180 reads it.
            status, answer = upload(
                base, seeded["token"], "quoted", "q.csv", b'id,text\n1,"a ""quoted"" , comma"\n', "csv"
            )
            probe("CSV doubled quotes with a comma: one cell", status == 201, f"{status}: {json.dumps(answer)[:160]}")
            status, answer = upload(base, seeded["token"], "split", "s.csv", b'id,a,b\n1,"x ""y"", z"\n', "csv")
            probe(
                "CSV row split wrongly by its quotes: refused", status == 400, f"{status}: {json.dumps(answer)[:160]}"
            )

            # A 5,000-digit integer in a JSON import.
            digits = ("9" * 5000).encode()
            status, answer = upload(
                base, seeded["token"], "big", "b.json", b'[{"id": 1, "n": ' + digits + b"}]", "json"
            )
            probe(
                "JSON import with a 5,000-digit integer: a 400 naming it",
                status == 400,
                f"{status}: {json.dumps(answer)[:200]}",
            )
    failed = [name for name, held, _ in results if not held]
    print(
        f"\n{len(results) - len(failed)} of {len(results)} held" + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
