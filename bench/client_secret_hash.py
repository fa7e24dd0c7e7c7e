"""What an OAuth client secret costs the server: a dynamic registration (`POST /oauth/register/`, which hashes
every new client's secret) and a client-authenticated revocation (`POST /oauth/revoke/` with the secret, which
checks it), with the secret hashed by the user-password hasher (PBKDF2 at Django's default iterations, the
old CLIENT_SECRET_HASHER "default") and by the client-secret hasher (oauth_app/client_secrets.py), side by
side in one process: rounds alternate the two, and the CPU time of the whole process (every thread, the
niced hashing thread included) is measured per request. Prints medians and the ratio.

    .venv/bin/python bench/client_secret_hash.py --rounds 15
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
os.environ.setdefault("DJANGO_SECRET_KEY", "bench")
os.environ["TOOLHUB_RATE_LIMITS_ENABLED"] = "false"
_directory = tempfile.mkdtemp(prefix="client-secret-bench-")
os.environ["DATABASE_URL"] = f"sqlite:///{_directory}/bench.sqlite3"
os.environ["TOOLHUB_PASSWORD_HASH_LOCK_DIR"] = _directory

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client, override_settings  # noqa: E402

from oauth_app import validators  # noqa: E402

REGISTRATION = {
    "client_name": "bench",
    "redirect_uris": ["https://client.example/cb"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "client_secret_post",
}


@contextmanager
def hasher_settings(name: str):
    """`before`: secrets hashed and checked with the user-password hasher, as CLIENT_SECRET_HASHER "default"
    did (the generated shape is kept, and the validator's refusal of a generated secret against a slow hash is
    switched off, so that the old client's check runs as it used to)."""
    provider = dict(settings.OAUTH2_PROVIDER)
    if name == "before":
        provider["CLIENT_SECRET_HASHER"] = "default"
    shape = validators.is_generated_secret
    if name == "before":
        validators.is_generated_secret = lambda secret: False
    try:
        with override_settings(OAUTH2_PROVIDER=provider):
            yield
    finally:
        validators.is_generated_secret = shape


def cpu_of(request, *args, **kwargs):
    """The process's CPU seconds for request(*args, **kwargs), and its answer."""
    started = time.process_time()
    answer = request(*args, **kwargs)
    return time.process_time() - started, answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    call_command("migrate", verbosity=0)
    client = Client(HTTP_HOST="localhost")
    registration = json.dumps(REGISTRATION)
    cpu: dict[str, dict[str, list[float]]] = {name: {"register": [], "revoke": []} for name in ("before", "after")}
    for _ in range(rounds):
        for name in ("before", "after"):
            with hasher_settings(name):
                spent, answer = cpu_of(client.post, "/oauth/register/", registration, content_type="application/json")
                assert answer.status_code == 201, answer.content
                cpu[name]["register"].append(spent)
                body = answer.json()
                form = {"token": "unknown", "client_id": body["client_id"], "client_secret": body["client_secret"]}
                spent, answer = cpu_of(client.post, "/oauth/revoke/", form)
                assert answer.status_code == 200, answer.content
                cpu[name]["revoke"].append(spent)
    print(f"CPU per request, median of {rounds} (one process, alternating), load {os.getloadavg()[0]:.1f}:")
    for request in ("register", "revoke"):
        before = statistics.median(cpu["before"][request]) * 1000
        after = statistics.median(cpu["after"][request]) * 1000
        ratio = before / after
        print(f"  {request:8} PBKDF2 {before:8.2f} ms   client-secret hasher {after:6.2f} ms   ratio {ratio:6.1f}x")


if __name__ == "__main__":
    main()
