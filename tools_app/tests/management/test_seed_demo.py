"""The demo-data command: idempotent, one tool of every data type, a fresh key each run."""

import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from mcp_app.tests.mcp_harness import Harness
from tools_app import services
from tools_app.choices import DATA_TYPES, READ_ONLY_REGISTRY_TYPES
from tools_app.execution.executors import execute
from tools_app.models import ApiKey, Binding, McpInstance, Prompt, Table, Tool

pytestmark = pytest.mark.django_db

KEY_LINE = re.compile(r"^API key \(shown once\): (thk_\S+)$", re.MULTILINE)


def _seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def _counts() -> dict[str, int]:
    return {
        "users": get_user_model().objects.filter(username="demo").count(),
        "tables": Table.objects.count(),
        "tools": Tool.objects.count(),
        "instances": McpInstance.objects.count(),
        "bindings": Binding.objects.count(),
    }


def test_seed_creates_the_demo_objects():
    """One owner, an array table and an object table, 17 tools: every data type and the read-only registry."""
    # given / when
    _seed()
    # then
    assert _counts() == {"users": 1, "tables": 2, "tools": 17, "instances": 1, "bindings": 17}
    demo = get_user_model().objects.get(username="demo")
    assert (demo.is_staff, demo.is_superuser, list(demo.groups.values_list("name", flat=True))) == (
        True,
        False,
        ["toolhub users"],
    )
    orders, catalog = Table.objects.get(name="orders"), Table.objects.get(name="catalog")
    assert (type(orders.data).__name__, type(catalog.data["products"]).__name__) == ("list", "dict")
    assert {tool.type for tool in Tool.objects.filter(owner=demo)} == set(DATA_TYPES) | READ_ONLY_REGISTRY_TYPES
    instance = McpInstance.objects.get(slug="demo")
    assert instance.owner_id == demo.pk
    assert Binding.objects.filter(mcp_instance=instance, enabled=True).count() == 17
    assert list(instance.prompts.values_list("name", flat=True)) == ["customer_report"]


def test_seeded_prompt_renders_over_mcp():
    """The demo's own prompt answers prompts/get with the customer filled in."""
    # given
    key = KEY_LINE.search(_seed()).group(1)
    body = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get"}
    body["params"] = {"name": "customer_report", "arguments": {"customer": "Ada"}}
    # when
    reply = Harness().post("demo", body, key=key).json()
    # then
    assert reply["result"]["messages"] == [
        {
            "role": "user",
            "content": {
                "type": "text",
                "text": "Using orders_schema and orders_query, write a short report on the orders of Ada: how many, "
                "their total, and which are not shipped yet.",
            },
        }
    ]


def test_seeded_registry_tools_answer_over_mcp():
    """The demo's registry tools work on the demo instance: search finds the orders query tool."""
    # given
    key = KEY_LINE.search(_seed()).group(1)
    # when
    reply = Harness().call("demo", key, "find_tools", {"query": "jmespath query orders", "limit": 1})
    # then
    result = reply["result"]
    assert result["isError"] is False
    assert [hit["tool_name"] for hit in result["structuredContent"]["results"]] == ["orders_query"]


def test_seed_is_idempotent_and_prints_a_fresh_key_each_time():
    """Running twice keeps the same objects; each run prints a new key that is stored (hashed)."""
    # given
    first = _seed()
    counts = _counts()
    ids = sorted(Tool.objects.values_list("pk", flat=True))
    # when
    second = _seed()
    # then
    assert _counts() == counts
    assert sorted(Tool.objects.values_list("pk", flat=True)) == ids
    assert Prompt.objects.count() == 1
    keys = [KEY_LINE.search(first).group(1), KEY_LINE.search(second).group(1)]
    assert keys[0] != keys[1]
    assert sorted(ApiKey.objects.values_list("key_hash", flat=True)) == sorted(ApiKey.hash_key(k) for k in keys)
    assert ApiKey.objects.filter(mcp_instance__slug="demo", revoked_at=None).count() == 2


def test_seed_prints_the_login_on_first_run_only():
    """The password is printed when the user is created, not on later runs (it may have been changed)."""
    # given / when
    first, second = _seed(), _seed()
    # then
    assert "Admin login: demo / demo-password" in first
    assert "Admin login: demo / (unchanged)" in second
    assert get_user_model().objects.get(username="demo").check_password("demo-password")


def test_seed_without_key():
    """--no-key issues and prints no key."""
    # given / when
    output = _seed("--no-key")
    # then
    assert KEY_LINE.search(output) is None
    assert ApiKey.objects.count() == 0


def test_seeded_tools_run():
    """The demo tools work on the demo data (read and write)."""
    # given
    _seed("--no-key")
    tool = {t.name: t for t in Tool.objects.all()}
    # when
    shipped = execute(tool=tool["orders_query"], arguments={"query": "[?status=='shipped'].id"})
    picked = execute(tool=tool["orders_select"], arguments={"keys": ["1", 3]})
    preview = execute(tool=tool["catalog_preview"], arguments={"limit": 1})
    created = execute(tool=tool["catalog_create"], arguments={"elements": [{"key": "HB-04", "content": {}}]})
    # then
    assert shipped == [2, 4]
    assert [order["id"] for order in picked["items"]] == [1, 3]
    assert preview["total_count"] == 3
    assert created == {"created": 1, "version": 2}


def test_seed_prints_an_absolute_endpoint_url(monkeypatch):
    """The endpoint is printed as a URL a client can use: start.sh's address, port from PORT (default 8000)."""
    # given
    monkeypatch.delenv("PORT", raising=False)
    # when
    default = _seed()
    monkeypatch.setenv("PORT", "9001")
    other_port = _seed()
    # then
    assert "MCP endpoint: http://127.0.0.1:8000/mcp/demo/\n" in default
    assert "MCP endpoint: http://127.0.0.1:9001/mcp/demo/\n" in other_port


def test_seed_endpoint_url_uses_the_public_url(settings):
    """With TOOLHUB_PUBLIC_URL set, the printed endpoint starts with it."""
    # given
    settings.TOOLHUB_PUBLIC_URL = "https://tools.example.com"
    # when
    output = _seed()
    # then
    assert "MCP endpoint: https://tools.example.com/mcp/demo/\n" in output


def test_seed_when_another_user_owns_the_demo_slug(make_user, make_instance):
    """Another user's instance 'demo' is left alone: the demo user gets its own instance 'demo-2', every run."""
    # given
    stranger = make_user("stranger")
    theirs = make_instance(stranger, slug="demo", name="Not the demo")
    # when
    first = _seed()
    second = _seed()
    # then
    demo = get_user_model().objects.get(username="demo")
    mine = McpInstance.objects.get(owner=demo)
    assert mine.slug == "demo-2"
    assert Binding.objects.filter(mcp_instance=mine).count() == 17
    assert Binding.objects.filter(mcp_instance=theirs).count() == 0
    assert ApiKey.objects.filter(mcp_instance=theirs).count() == 0
    assert McpInstance.objects.count() == 2
    note = "The slug 'demo' belongs to another user's instance: the demo instance is 'demo-2'.\n"
    for output in (first, second):
        assert note in output
        assert "MCP endpoint: http://127.0.0.1:8000/mcp/demo-2/\n" in output
    assert KEY_LINE.search(second) is not None


def test_seed_keeps_using_the_demo_users_own_instance(make_user, make_instance):
    """Once the demo user has 'demo', a later run uses it without any note."""
    # given
    _seed("--no-key")
    # when
    output = _seed()
    # then
    assert McpInstance.objects.get().slug == "demo"
    assert "belongs to another user" not in output


#
# Production guard: refused with DEBUG and TOOLHUB_DEV off, unless --force
#


def test_seed_refuses_in_production_and_writes_nothing(settings):
    """With DEBUG and TOOLHUB_DEV off the command stops with a clear message and exit code 1."""
    # given
    settings.DEBUG = False
    settings.TOOLHUB_DEV = False
    # when
    with pytest.raises(CommandError) as caught:
        _seed()
    # then
    assert caught.value.returncode == 1
    assert str(caught.value) == (
        "seed_demo refused: DJANGO_DEBUG and TOOLHUB_DEV are both off, so this looks like a production "
        "database, and the demo adds a staff user with a known password and a working API key. For "
        "development run it with TOOLHUB_DEV=true; to seed this database anyway, add --force."
    )
    assert _counts() == {"users": 0, "tables": 0, "tools": 0, "instances": 0, "bindings": 0}
    assert ApiKey.objects.count() == 0


def test_seed_with_force_runs_in_production(settings):
    """--force seeds a production database anyway."""
    # given
    settings.DEBUG = False
    settings.TOOLHUB_DEV = False
    # when
    out = _seed("--force", "--no-key")
    # then
    assert "Demo data ready: instance 'demo' serves 17 tools (17 of them the demo's)." in out
    assert _counts() == {"users": 1, "tables": 2, "tools": 17, "instances": 1, "bindings": 17}


@pytest.mark.parametrize(("debug", "dev"), [(True, False), (False, True)])
def test_seed_runs_with_debug_or_toolhub_dev(settings, debug, dev):
    """DEBUG or TOOLHUB_DEV (what scripts/start.sh sets) is development: no --force needed."""
    # given
    settings.DEBUG = debug
    settings.TOOLHUB_DEV = dev
    # when
    _seed("--no-key")
    # then
    assert _counts()["tools"] == 17


def _manage(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """manage.py in a subprocess with only `env` (no development settings), on an SQLite file in tmp_path."""
    base = {"PATH": os.environ.get("PATH", ""), "DATABASE_URL": f"sqlite:///{tmp_path / 'prod.sqlite3'}"}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=Path(__file__).resolve().parents[3],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_seed_in_production_process_exits_1_without_traceback(tmp_path):
    """From the shell: exit code 1, the message on stderr, no traceback, no database file created."""
    # when
    done = _manage(tmp_path, "seed_demo", DJANGO_SECRET_KEY="a-production-secret")
    # then
    assert done.returncode == 1
    assert done.stderr.startswith("CommandError: seed_demo refused: DJANGO_DEBUG and TOOLHUB_DEV are both off")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "prod.sqlite3").exists()


def test_missing_development_settings_is_a_message_not_a_traceback(tmp_path):
    """Without DJANGO_SECRET_KEY and without TOOLHUB_DEV: what to set, exit code 1, no traceback."""
    # when
    done = _manage(tmp_path, "seed_demo")
    # then
    assert done.returncode == 1
    assert done.stderr == "Error: Set DJANGO_SECRET_KEY (or DJANGO_DEBUG=true / TOOLHUB_DEV=true for development).\n"
    assert not (tmp_path / "prod.sqlite3").exists()


def test_seed_counts_the_tools_the_instance_serves(make_tool):
    """A second start after tools were added to the demo instance names what the instance serves: every enabled
    binding, not only the demo's 17."""
    # given
    _seed("--no-key")
    demo = get_user_model().objects.get(username="demo")
    instance = McpInstance.objects.get(slug="demo")
    for number in range(3):
        services.binding_create(
            mcp_instance=instance, tool=make_tool(demo, name=f"extra_{number}", type="search_tools")
        )
    services.binding_create(
        mcp_instance=instance, tool=make_tool(demo, name="extra_off", type="search_tools"), enabled=False
    )
    # when
    out = _seed("--no-key")
    # then
    assert "Demo data ready: instance 'demo' serves 20 tools (17 of them the demo's)." in out
