"""register_tool's per-owner tool quota: TOOLHUB_MAX_TOOLS_PER_OWNER, default 1000.

Over MCP, in process: an owner at the quota gets REGISTRATION_FAILED naming the quota, and nothing is
written but the call's own log row.
"""

import pytest
from django.conf import settings

from mcp_app.tests.mcp_harness import Harness
from tools_app.models import Binding, CallLog, Tool
from tools_app.services import instance_update
from tools_app.tests.services.test_concurrency import _in_threads

pytestmark = pytest.mark.django_db


@pytest.fixture
def open_shop(owner, make_tool, instance, bind, make_api_key):
    """Instance 'shop' of `owner`, open to registration, with register_tool bound: the owner has 1 tool."""
    instance_update(instance=instance, allow_registration=True)
    bind(instance, make_tool(owner, type="register_tool", name="register_tool", description="Register a tool."))
    return {"instance": instance, "key": make_api_key(instance)[1]}


def register(open_shop, name: str) -> dict:
    arguments = {"name": name, "description": "Current weather for a city.", "mcp_server": "wx-server"}
    return Harness().call("shop", open_shop["key"], "register_tool", arguments)["result"]


def snapshot():
    return Tool.objects.count(), Binding.objects.count(), sorted(Tool.objects.values_list("name", flat=True))


def test_default_quota_is_1000():
    """The documented default (README, docs/deploy.md)."""
    assert settings.TOOLHUB_MAX_TOOLS_PER_OWNER == 1000


def test_registration_up_to_the_quota_succeeds(open_shop, owner, settings):
    """With quota 2 and one tool, the second tool is registered and bound."""
    # given
    settings.TOOLHUB_MAX_TOOLS_PER_OWNER = 2
    # when
    result = register(open_shop, "weather_now")
    # then
    assert result["isError"] is False
    assert Tool.objects.filter(owner=owner).count() == 2
    assert Binding.objects.filter(mcp_instance=open_shop["instance"], tool__name="weather_now").count() == 1


def test_registration_over_the_quota_fails_naming_it_and_writes_nothing(open_shop, owner, settings):
    """At the quota register_tool is REGISTRATION_FAILED with the quota in the message and the details;
    no tool, no binding; the call is logged as that error."""
    # given
    settings.TOOLHUB_MAX_TOOLS_PER_OWNER = 2
    assert register(open_shop, "weather_now")["isError"] is False
    before = snapshot()
    # when
    result = register(open_shop, "weather_tomorrow")
    # then
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        "REGISTRATION_FAILED: The tool 'weather_tomorrow' was not registered: its owner already has 2 tools, "
        "and the quota is 2 tools per owner (setting TOOLHUB_MAX_TOOLS_PER_OWNER). Delete tools or ask the "
        "administrator to raise the quota."
    )
    assert result["structuredContent"]["details"] == {"reason": "quota", "quota": 2, "tools": 2}
    assert snapshot() == before
    last = CallLog.objects.order_by("-id").first()
    assert (last.tool_name, last.status, last.error_code) == ("register_tool", "error", "REGISTRATION_FAILED")


def test_quota_counts_every_tool_of_the_owner_and_only_the_owners(open_shop, owner, other_user, make_tool, settings):
    """Tools of any type count; another user's tools do not."""
    # given: the owner has register_tool and a data tool; another user has three tools
    settings.TOOLHUB_MAX_TOOLS_PER_OWNER = 3
    make_tool(owner, None, type="external", name="elsewhere", description="")
    for n in range(3):
        make_tool(other_user, None, type="external", name=f"theirs_{n}", description="")
    # when
    first = register(open_shop, "weather_now")
    second = register(open_shop, "weather_tomorrow")
    # then
    assert first["isError"] is False
    assert second["isError"] is True
    assert second["structuredContent"]["details"] == {"reason": "quota", "quota": 3, "tools": 3}
    assert Tool.objects.filter(owner=owner).count() == 3
    assert not Tool.objects.filter(name="weather_tomorrow").exists()


RACERS = 12


@pytest.mark.postgres
@pytest.mark.usefixtures("postgres_db")
def test_concurrent_registrations_stop_exactly_at_the_quota(owner, make_tool, instance, bind, settings):
    """12 threads register 12 tools at once with room for 3: exactly 3 are created, 9 refused for the quota."""
    from tools_app.execution.executors import execute
    from tools_app.kernel.errors import ToolError
    from tools_app.models import McpInstance
    from tools_app.registry.instance_scope import InstanceScope

    # given: the owner has register_tool (1 tool); the quota leaves room for 3 more
    instance_update(instance=instance, allow_registration=True)
    registrar = make_tool(owner, type="register_tool", name="register_tool", description="Register a tool.")
    bind(instance, registrar)
    settings.TOOLHUB_MAX_TOOLS_PER_OWNER = 4

    # when
    def worker(index: int):
        scope = InstanceScope(McpInstance.objects.get(pk=instance.pk))
        arguments = {"name": f"racer_{index:02d}", "description": "A raced registration."}
        return execute(tool=Tool.objects.get(pk=registrar.pk), arguments=arguments, scope=scope)["tool_id"]

    results = _in_threads(RACERS, worker)

    # then
    created = [result for result in results if isinstance(result, int)]
    refused = [result for result in results if isinstance(result, ToolError)]
    assert (len(created), len(refused)) == (3, RACERS - 3)
    assert {(error.code, error.details["reason"], error.details["quota"]) for error in refused} == {
        ("REGISTRATION_FAILED", "quota", 4)
    }
    assert Tool.objects.filter(owner=owner).count() == 4
    assert sorted(Tool.objects.filter(owner=owner, type="external").values_list("pk", flat=True)) == sorted(created)
    assert Binding.objects.filter(mcp_instance=instance).count() == 4
