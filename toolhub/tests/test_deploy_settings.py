"""The production settings (docs/deploy.md): `check --deploy` is clean, and TOOLHUB_HTTPS turns on
secure cookies, HSTS and the redirect to HTTPS.

Settings are read once per process from the environment, so each case runs Django in a subprocess with
exactly the environment a deployment would have.
"""

import json
import os
import secrets
import subprocess
import sys

import pytest

from tests.factories import migrated_sqlite_file
from tests.live_server import ROOT

# A key as `check --deploy` wants it: 50+ characters, 5+ distinct, no "django-insecure-" prefix.
PRODUCTION = {
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "toolhub.example.com",
    "TOOLHUB_HTTPS": "1",
}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ.get("PATH", ""), "DATABASE_URL": os.environ.get("DATABASE_URL", "")}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_under_the_production_settings():
    """DEBUG off, TOOLHUB_HTTPS=1, a real secret key and the public host: no issue at all, none silenced."""
    # when
    done = run(PRODUCTION, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    # then
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "System check identified no issues (0 silenced).\n"


def test_check_deploy_without_the_https_switch_names_what_is_missing():
    """Without TOOLHUB_HTTPS the deploy check warns about exactly the four settings the switch turns on."""
    # when
    done = run({**PRODUCTION, "TOOLHUB_HTTPS": ""}, "manage.py", "check", "--deploy", "--fail-level", "WARNING")
    # then
    assert done.returncode == 1
    found = sorted(
        code for code in ("W004", "W008", "W012", "W016", "W005", "W021") if f"security.{code}" in done.stderr
    )
    assert found == ["W004", "W008", "W012", "W016"]


@pytest.mark.parametrize(
    ("extra", "hsts", "silenced"),
    [
        ({}, "max-age=31536000; includeSubDomains; preload", 0),
        ({"TOOLHUB_HSTS_PRELOAD": "0"}, "max-age=31536000; includeSubDomains", 1),
        ({"TOOLHUB_HSTS_SECONDS": "600", "TOOLHUB_HSTS_INCLUDE_SUBDOMAINS": "0"}, "max-age=600; preload", 1),
    ],
)
def test_https_switch_sets_hsts_secure_cookies_and_redirects(extra, hsts, silenced, tmp_path):
    """Over HTTPS: HSTS as configured, Secure session and CSRF cookies; plain HTTP is redirected (301)."""
    # given
    migrated_sqlite_file(tmp_path / "deploy.sqlite3")
    code = (
        "import json, os, django; os.environ['DJANGO_SETTINGS_MODULE'] = 'toolhub.settings'; django.setup()\n"
        "from django.conf import settings\n"
        "from django.test import Client\n"
        "client = Client(HTTP_HOST='toolhub.example.com')\n"
        "plain = client.get('/admin/login/')\n"
        "secure = client.get('/admin/login/', secure=True)\n"
        "print(json.dumps({'plain': [plain.status_code, plain.get('Location')],\n"
        "    'status': secure.status_code, 'hsts': secure.get('Strict-Transport-Security'),\n"
        "    'csrf_secure': secure.cookies['csrftoken']['secure'], 'session_secure': settings.SESSION_COOKIE_SECURE,\n"
        "    'silenced': len(settings.SILENCED_SYSTEM_CHECKS),\n"
        "    'csp': secure.get('Content-Security-Policy', '')}))\n"
    )
    env = {**PRODUCTION, **extra, "DATABASE_URL": f"sqlite:///{tmp_path / 'deploy.sqlite3'}"}
    # when
    done = run(env, "-c", code)
    # then
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["plain"] == [301, "https://toolhub.example.com/admin/login/"]
    assert (answer["status"], answer["hsts"]) == (200, hsts)
    assert (answer["csrf_secure"], answer["session_secure"]) == (True, True)
    assert answer["silenced"] == silenced
    assert "upgrade-insecure-requests" in answer["csp"].split("; ")


def test_proxy_ssl_header_is_read_from_the_environment():
    """DJANGO_SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto: a request the proxy marks https counts as secure."""
    # given
    code = (
        "import os, django; os.environ['DJANGO_SETTINGS_MODULE'] = 'toolhub.settings'; django.setup()\n"
        "from django.conf import settings\n"
        "from django.test import RequestFactory\n"
        "request = RequestFactory().get('/', HTTP_X_FORWARDED_PROTO='https')\n"
        "print(settings.SECURE_PROXY_SSL_HEADER, request.is_secure())\n"
    )
    # when
    done = run({**PRODUCTION, "DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto"}, "-c", code)
    # then
    assert done.returncode == 0, done.stderr
    assert done.stdout == "('HTTP_X_FORWARDED_PROTO', 'https') True\n"


@pytest.mark.parametrize(
    ("name", "value"),
    [("TOOLHUB_MAX_TOOLS_PER_OWNER", "many"), ("TOOLHUB_HSTS_SECONDS", "-1"), ("TOOLHUB_TABLE_CACHE_BYTES", "-1")],
)
def test_a_bad_number_stops_manage_py_with_a_message(name, value):
    """A setting that is not a whole number >= 0 is named in one line on stderr, exit code 1, no traceback."""
    # when
    done = run({**PRODUCTION, name: value}, "manage.py", "check")
    # then
    assert done.returncode == 1
    assert done.stderr == f"Error: {name} must be a whole number of at least 0, not {value!r}.\n"


@pytest.mark.django_db
@pytest.mark.skipif("postgres" in os.environ.get("DATABASE_URL", ""), reason="SQLite's connection settings")
def test_a_sqlite_connection_reads_through_wal_with_the_default_page_cache():
    """Each SQLite connection: WAL, synchronous NORMAL (1), and SQLite's default page cache (-2000 KiB): a larger
    one per connection took a 1,000,000-record table's worker over its RSS bound."""
    from django.db import connection

    with connection.cursor() as cursor:
        settings_read = [cursor.execute(f"PRAGMA {name}").fetchone()[0] for name in ("synchronous", "cache_size")]
    assert settings_read == [1, -2000]
