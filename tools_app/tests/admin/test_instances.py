"""The admin for instances, bindings, API keys and the call log (SPEC §2, §7)."""

import json
import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.urls import reverse

from tools_app.admin.stats import call_stats, percentile
from tools_app.kernel.errors import ErrorCode
from tools_app.models import ApiKey, Binding, CallLog, McpInstance


@pytest.fixture
def bound(owner, table, make_tool, instance, bind):
    """Two tools bound to the owner's instance 'shop': orders_query and orders_all."""
    query = make_tool(owner, table, name="orders_query")
    everything = make_tool(owner, table, name="orders_all", type="get_all_data")
    return bind(instance, query), bind(instance, everything)


def instance_form(instance, bindings=(), extra_rows=(), prompts=(), prompt_rows=(), **overrides):
    """The instance change form as the browser posts it, with the binding and prompt inline formsets.

    `prompts` are existing Prompt rows, `prompt_rows` the new rows' fields.
    """
    data = {
        "name": instance.name,
        "slug": instance.slug,
        "description": instance.description,
        "instructions": instance.instructions,
        "discovery": instance.discovery,
        "max_result_bytes": instance.max_result_bytes,
        "key_rate_limit": instance.key_rate_limit,
        "bindings-TOTAL_FORMS": len(bindings) + len(extra_rows),
        "bindings-INITIAL_FORMS": len(bindings),
        "bindings-MIN_NUM_FORMS": 0,
        "bindings-MAX_NUM_FORMS": 1000,
        "prompts-TOTAL_FORMS": len(prompts) + len(prompt_rows),
        "prompts-INITIAL_FORMS": len(prompts),
        "prompts-MIN_NUM_FORMS": 0,
        "prompts-MAX_NUM_FORMS": 1000,
    }
    if instance.enabled:
        data["enabled"] = "on"
    rows = [
        {
            "id": b.pk,
            "mcp_instance": instance.pk,
            "tool": b.tool_id,
            "enabled": b.enabled,
            "name_override": b.name_override,
            "description_override": b.description_override,
        }
        for b in bindings
    ] + [{"mcp_instance": instance.pk, "enabled": True, "name_override": "", **row} for row in extra_rows]
    for index, row in enumerate(rows):
        for key, value in row.items():
            if key == "enabled" or key == "DELETE":
                if value:
                    data[f"bindings-{index}-{key}"] = "on"
            else:
                data[f"bindings-{index}-{key}"] = value
    prompt_data = [
        {
            "id": p.pk,
            "mcp_instance": instance.pk,
            "name": p.name,
            "title": p.title,
            "description": p.description,
            "arguments": json.dumps(p.arguments),
            "template": p.template,
            "enabled": p.enabled,
        }
        for p in prompts
    ] + [{"mcp_instance": instance.pk, "enabled": True, **row} for row in prompt_rows]
    for index, row in enumerate(prompt_data):
        for key, value in row.items():
            if key in ("enabled", "DELETE"):
                if value:
                    data[f"prompts-{index}-{key}"] = "on"
            else:
                data[f"prompts-{index}-{key}"] = value
    data.update(overrides)
    return data


def change_url(instance):
    return reverse("admin:tools_app_mcpinstance_change", args=[instance.pk])


#
# Ownership
#


@pytest.mark.parametrize("model", ["mcpinstance", "binding", "apikey", "calllog"])
def test_list_hides_other_users_objects(other_client, owner, bound, instance, make_api_key, model):
    """A staff user who is not the owner lists none of another user's instances, bindings, keys or calls."""
    # given
    make_api_key(instance)
    CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="orders_query", status="ok", duration_ms=1)
    # when
    response = other_client.get(reverse(f"admin:tools_app_{model}_changelist"))
    # then
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == []


@pytest.mark.parametrize("model", ["mcpinstance", "binding", "apikey", "calllog"])
def test_superuser_lists_every_users_objects(client, superuser, owner, bound, instance, make_api_key, model):
    """A superuser lists everyone's instances, bindings, keys and calls."""
    # given
    make_api_key(instance)
    CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="orders_query", status="ok", duration_ms=1)
    client.force_login(superuser)
    # when
    response = client.get(reverse(f"admin:tools_app_{model}_changelist"))
    # then
    expected = {"mcpinstance": 1, "binding": 2, "apikey": 1, "calllog": 1}[model]
    assert len(response.context["cl"].result_list) == expected


def test_other_user_cannot_open_change_or_delete_instance(other_client, instance):
    """Another user's instance: not opened, not changed, not deleted."""
    # when
    opened = other_client.get(change_url(instance))
    changed = other_client.post(change_url(instance), instance_form(instance, name="stolen"))
    deleted = other_client.post(reverse("admin:tools_app_mcpinstance_delete", args=[instance.pk]), {"post": "yes"})
    # then
    assert [opened.status_code, changed.status_code, deleted.status_code] == [302, 302, 302]
    instance.refresh_from_db()
    assert instance.name == "Shop"


def test_other_user_cannot_open_change_or_delete_binding(other_client, bound):
    """Another user's binding: not opened, not changed, not deleted."""
    # given
    binding = bound[0]
    url = reverse("admin:tools_app_binding_change", args=[binding.pk])
    # when
    opened = other_client.get(url)
    changed = other_client.post(url, {"mcp_instance": binding.mcp_instance_id, "tool": binding.tool_id})
    deleted = other_client.post(reverse("admin:tools_app_binding_delete", args=[binding.pk]), {"post": "yes"})
    # then
    assert [opened.status_code, changed.status_code, deleted.status_code] == [302, 302, 302]
    binding.refresh_from_db()
    assert binding.enabled is True


def test_other_user_cannot_open_or_delete_api_key(other_client, instance, make_api_key):
    """Another user's API key: not opened, not deleted."""
    # given
    key, _ = make_api_key(instance)
    # when
    opened = other_client.get(reverse("admin:tools_app_apikey_change", args=[key.pk]))
    deleted = other_client.post(reverse("admin:tools_app_apikey_delete", args=[key.pk]), {"post": "yes"})
    # then
    assert [opened.status_code, deleted.status_code] == [302, 302]
    assert ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).exists()


def test_binding_form_choices_are_own_objects(client, owner, other_user, make_table, make_tool, make_instance):
    """The binding form offers only the user's own instances and tools."""
    # given
    mine_tool = make_tool(owner, make_table(owner), name="mine")
    make_tool(other_user, make_table(other_user), name="theirs")
    mine_instance = make_instance(owner, slug="mine")
    make_instance(other_user, slug="theirs")
    client.force_login(owner)
    # when
    response = client.get(reverse("admin:tools_app_binding_add"))
    # then
    form = response.context["adminform"].form
    assert [c.value for c, _ in form.fields["tool"].choices if c] == [mine_tool.pk]
    assert [c.value for c, _ in form.fields["mcp_instance"].choices if c] == [mine_instance.pk]


def test_binding_other_users_tool_is_refused(client, owner, other_user, make_table, make_tool, instance):
    """Posting another user's tool id to the binding form is a form error; nothing is bound."""
    # given
    theirs = make_tool(other_user, make_table(other_user), name="theirs")
    client.force_login(owner)
    # when
    response = client.post(
        reverse("admin:tools_app_binding_add"), {"mcp_instance": instance.pk, "tool": theirs.pk, "enabled": "on"}
    )
    # then
    assert response.status_code == 200
    assert "Select a valid choice" in str(response.context["adminform"].form.errors["tool"])
    assert Binding.objects.count() == 0


def test_inline_tool_choices_are_own_tools(client, owner, other_user, make_table, make_tool, instance):
    """The binding rows on the instance page offer only the user's own tools."""
    # given
    mine = make_tool(owner, make_table(owner), name="mine")
    make_tool(other_user, make_table(other_user), name="theirs")
    client.force_login(owner)
    # when
    response = client.get(change_url(instance))
    # then
    formset = response.context["inline_admin_formsets"][0].formset
    assert [c.value for c, _ in formset.forms[0].fields["tool"].choices if c] == [mine.pk]


def test_call_log_filter_choices_are_own_instances(client, owner, other_user, make_instance):
    """The call log's instance filter lists only the user's own instances."""
    # given
    mine = make_instance(owner, slug="mine")
    theirs = make_instance(other_user, slug="theirs")
    for instance in (mine, theirs):
        CallLog.objects.create(owner=instance.owner, mcp_instance=instance, tool_name="t", status="ok", duration_ms=1)
    client.force_login(owner)
    # when
    response = client.get(reverse("admin:tools_app_calllog_changelist"))
    # then
    html = response.content.decode()
    assert f"mcp_instance__id__exact={mine.pk}" in html
    assert f"mcp_instance__id__exact={theirs.pk}" not in html


#
# Instance page: bindings inline through the services
#


def test_inline_adds_binding_through_service(owner_client, owner, table, make_tool, instance):
    """A new row in the instance's binding inline creates a binding (with its name key)."""
    # given
    tool = make_tool(owner, table, name="Orders_Query")
    # when
    response = owner_client.post(change_url(instance), instance_form(instance, extra_rows=[{"tool": tool.pk}]))
    # then
    assert response.status_code == 302
    binding = Binding.objects.get()
    assert (binding.tool_id, binding.enabled, binding.name_key) == (tool.pk, True, "orders_query")


def test_inline_disable_and_override(owner_client, instance, bound):
    """Unticking enabled and setting an override in the inline saves both."""
    # given
    query, everything = bound
    query.enabled = False
    query.name_override = "find_orders"
    # when
    response = owner_client.post(change_url(instance), instance_form(instance, [query, everything]))
    # then
    assert response.status_code == 302
    query.refresh_from_db()
    assert (query.enabled, query.name_override, query.name_key) == (False, "find_orders", "find_orders")


def test_inline_override_into_existing_name_is_form_error(owner_client, instance, bound):
    """An override that collides (ignoring case) with another bound name is a NAME_CONFLICT row error."""
    # given
    query, everything = bound
    everything.name_override = "ORDERS_QUERY"
    # when
    response = owner_client.post(change_url(instance), instance_form(instance, [query, everything]))
    # then
    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    errors = formset.forms[1].errors.as_data()["name_override"]
    assert errors[0].code == ErrorCode.NAME_CONFLICT
    assert "'orders_query' on the instance 'Shop'" in errors[0].messages[0]
    everything.refresh_from_db()
    assert everything.name_override == ""


def test_inline_two_new_rows_with_one_name_are_refused(owner_client, owner, table, make_tool, instance):
    """Two rows of one submit that end with the same effective name are refused; nothing is bound."""
    # given
    first = make_tool(owner, table, name="a_tool")
    second = make_tool(owner, table, name="b_tool", type="get_all_data")
    rows = [{"tool": first.pk, "name_override": "same"}, {"tool": second.pk, "name_override": "Same"}]
    # when
    response = owner_client.post(change_url(instance), instance_form(instance, extra_rows=rows))
    # then
    assert response.status_code == 200
    formset = response.context["inline_admin_formsets"][0].formset
    assert formset.forms[1].errors.as_data()["name_override"][0].code == ErrorCode.NAME_CONFLICT
    assert Binding.objects.count() == 0


def test_inline_deleting_frees_the_name(owner_client, owner, table, make_tool, instance, bound):
    """Unbinding a row and giving its name to another row in the same submit is accepted."""
    # given
    query, everything = bound
    everything.name_override = "orders_query"
    data = instance_form(instance, [query, everything])
    data["bindings-0-DELETE"] = "on"
    # when
    response = owner_client.post(change_url(instance), data)
    # then
    assert response.status_code == 302
    assert list(Binding.objects.values_list("name_key", flat=True)) == ["orders_query"]
    assert Binding.objects.get().tool_id == everything.tool_id


def test_inline_service_refusal_at_save_is_form_error(owner_client, instance, bound, monkeypatch):
    """A conflict the binding service finds at save time is shown on the page and nothing is saved."""
    # given
    from tools_app import services

    def refuse(**kwargs):
        raise ValidationError({"name_override": ValidationError("Taken meanwhile.", code=ErrorCode.NAME_CONFLICT)})

    monkeypatch.setattr(services, "binding_update", refuse)
    query, everything = bound
    query.enabled = False
    # when
    response = owner_client.post(
        change_url(instance), instance_form(instance, [query, everything], description="changed")
    )
    # then
    assert response.status_code == 200
    assert response.context["adminform"].form.non_field_errors() == ["Bound tool 'orders_query': Taken meanwhile."]
    instance.refresh_from_db()
    query.refresh_from_db()
    assert (instance.description, query.enabled) == ("", True)


def test_instance_add_goes_through_service(owner_client, owner):
    """An instance added in the admin belongs to the user."""
    # given
    data = instance_form(McpInstance(name="CRM", slug="crm", max_result_bytes=5000))
    # when
    response = owner_client.post(reverse("admin:tools_app_mcpinstance_add"), data)
    # then
    assert response.status_code == 302
    assert McpInstance.objects.get(slug="crm").owner == owner


def test_binding_admin_name_conflict_is_form_error(owner_client, owner, table, make_tool, instance, bound):
    """Binding a tool whose name is taken on the instance is a NAME_CONFLICT form error."""
    # given
    other = make_tool(owner, table, name="ORDERS_ALL", type="preview")
    # when
    response = owner_client.post(
        reverse("admin:tools_app_binding_add"), {"mcp_instance": instance.pk, "tool": other.pk, "enabled": "on"}
    )
    # then
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors.as_data()["tool"]
    assert errors[0].code == ErrorCode.NAME_CONFLICT
    assert Binding.objects.count() == 2


#
# Bulk actions
#


def test_bulk_disable_enable_and_unbind(owner_client, bound):
    """The binding list's actions disable, enable and unbind the selected bindings."""
    # given
    query, everything = bound
    url = reverse("admin:tools_app_binding_changelist")
    # when
    owner_client.post(url, {"action": "disable_bindings", "_selected_action": [query.pk, everything.pk]})
    disabled = sorted(Binding.objects.values_list("enabled", flat=True))
    owner_client.post(url, {"action": "enable_bindings", "_selected_action": [query.pk]})
    enabled = dict(Binding.objects.values_list("pk", "enabled"))
    owner_client.post(url, {"action": "unbind", "_selected_action": [everything.pk]})
    # then
    assert disabled == [False, False]
    assert enabled == {query.pk: True, everything.pk: False}
    assert list(Binding.objects.values_list("pk", flat=True)) == [query.pk]


def test_bulk_actions_do_not_reach_other_users_bindings(other_client, bound):
    """Selecting another user's binding ids changes nothing."""
    # given
    url = reverse("admin:tools_app_binding_changelist")
    ids = [b.pk for b in bound]
    # when
    other_client.post(url, {"action": "disable_bindings", "_selected_action": ids})
    other_client.post(url, {"action": "unbind", "_selected_action": ids})
    # then
    assert sorted(Binding.objects.values_list("enabled", flat=True)) == [True, True]


def test_instance_page_enable_and_disable_all(owner_client, instance, bound):
    """The instance page's buttons disable and enable every binding of the instance."""
    # when
    owner_client.post(reverse("admin:tools_app_mcpinstance_bindings_bulk", args=[instance.pk, "disable"]))
    after_disable = sorted(Binding.objects.values_list("enabled", flat=True))
    owner_client.post(reverse("admin:tools_app_mcpinstance_bindings_bulk", args=[instance.pk, "enable"]))
    # then
    assert after_disable == [False, False]
    assert sorted(Binding.objects.values_list("enabled", flat=True)) == [True, True]


def test_instance_bulk_buttons_refuse_other_user(other_client, instance, bound):
    """Another user cannot disable the instance's bindings: 404 and nothing changes."""
    # when
    response = other_client.post(reverse("admin:tools_app_mcpinstance_bindings_bulk", args=[instance.pk, "disable"]))
    # then
    assert response.status_code == 404
    assert sorted(Binding.objects.values_list("enabled", flat=True)) == [True, True]


#
# API keys: shown once
#


def test_key_is_shown_once_and_stored_hashed(owner_client, instance):
    """Creating a key shows its plaintext on the response page only; the database holds its hash."""
    # when
    created = owner_client.post(reverse("admin:tools_app_mcpinstance_key_create", args=[instance.pk]), {"label": "cli"})
    later = owner_client.get(change_url(instance))
    # then
    plaintext = created.context["plaintext"]
    key = ApiKey.objects.get()
    assert (key.label, key.key_hash, key.prefix) == ("cli", ApiKey.hash_key(plaintext), plaintext[:10])
    assert "no-store" in created["Cache-Control"]
    assert plaintext in created.content.decode()
    assert f'"Authorization": "Bearer {plaintext}"' in created.content.decode().replace("&quot;", '"')
    assert plaintext not in later.content.decode()
    assert key.prefix in later.content.decode()


def test_key_created_from_api_key_admin_is_shown_once(owner_client, instance):
    """The API key add form issues the key through the service and shows it on the response only."""
    # when
    response = owner_client.post(reverse("admin:tools_app_apikey_add"), {"mcp_instance": instance.pk, "label": "ci"})
    listing = owner_client.get(reverse("admin:tools_app_apikey_changelist"))
    # then
    plaintext = response.context["plaintext"]
    assert ApiKey.objects.get().key_hash == ApiKey.hash_key(plaintext)
    assert plaintext not in listing.content.decode()


def test_key_for_other_users_instance_is_refused(other_client, instance):
    """Another user cannot create a key on the instance: 404, no key."""
    # when
    page = other_client.post(reverse("admin:tools_app_mcpinstance_key_create", args=[instance.pk]), {"label": "x"})
    form = other_client.post(reverse("admin:tools_app_apikey_add"), {"mcp_instance": instance.pk, "label": "x"})
    # then
    assert page.status_code == 404
    assert "Select a valid choice" in str(form.context["adminform"].form.errors["mcp_instance"])
    assert ApiKey.objects.count() == 0


def test_key_revoke(owner_client, instance, make_api_key):
    """The revoke button revokes the key."""
    # given
    key, _ = make_api_key(instance)
    # when
    response = owner_client.post(reverse("admin:tools_app_mcpinstance_key_revoke", args=[instance.pk, key.pk]))
    # then
    assert response.status_code == 302
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_key_revoke_by_other_user_is_404(other_client, instance, make_api_key):
    """Another user cannot revoke the key."""
    # given
    key, _ = make_api_key(instance)
    # when
    response = other_client.post(reverse("admin:tools_app_mcpinstance_key_revoke", args=[instance.pk, key.pk]))
    # then
    assert response.status_code == 404
    key.refresh_from_db()
    assert key.revoked_at is None


#
# Instance page content
#


def test_instance_page_shows_endpoint_and_client_configs(owner_client, instance, bound):
    """Endpoint URL and configs for Claude Desktop, Cursor, VS Code and the Inspector, with a key placeholder."""
    # when
    response = owner_client.get(change_url(instance))
    # then
    assert response.context["endpoint_url"] == "http://testserver/mcp/shop/"
    configs = {config["id"]: config for config in response.context["client_configs"]}
    assert list(configs) == ["claude", "cursor", "vscode", "inspector"]
    header = {"Authorization": "Bearer <YOUR_API_KEY>"}
    assert json.loads(configs["cursor"]["text"]) == {
        "mcpServers": {"toolhub-shop": {"url": "http://testserver/mcp/shop/", "headers": header}}
    }
    assert json.loads(configs["vscode"]["text"])["servers"]["toolhub-shop"]["type"] == "http"
    claude = json.loads(configs["claude"]["text"])["mcpServers"]["toolhub-shop"]
    assert claude["args"][2] == "http://testserver/mcp/shop/"
    assert claude["env"] == {"TOOLHUB_AUTH": "Bearer <YOUR_API_KEY>"}
    assert '--header "Authorization: Bearer <YOUR_API_KEY>" --method tools/list' in configs["inspector"]["text"]


def test_instance_page_estimates_tool_list_tokens(owner_client, instance, bound):
    """The page estimates the tokens of tools/list from the JSON of the enabled tools (~4 chars/token)."""
    # given
    from tools_app.registry.export import tool_entry

    expected_chars = len(json.dumps([tool_entry(b) for b in Binding.objects.enabled_for(instance)]))
    # when
    response = owner_client.get(change_url(instance))
    # then
    estimate = response.context["tool_list_estimate"]
    assert (estimate["tools"], estimate["tokens"]) == (2, -(-expected_chars // 4))
    assert estimate["large"] is False
    assert "an estimate" in response.content.decode().lower()


def test_large_tool_list_suggests_search(owner_client, instance, bound, monkeypatch):
    """Above the threshold the page suggests discovery = search."""
    # given
    from tools_app.admin import instances as mcp_admin

    monkeypatch.setattr(mcp_admin, "LARGE_TOOL_LIST_TOKENS", 10)
    # when
    response = owner_client.get(change_url(instance))
    # then
    assert "Consider discovery = search" in response.content.decode()


def test_instance_page_renders_usage_guide(owner_client, instance, bound):
    """The usage guide is rendered from Markdown to HTML on its page, linked from the instance page."""
    # when
    page = owner_client.get(change_url(instance))
    response = owner_client.get(reverse("admin:tools_app_mcpinstance_guide", args=[instance.pk]))
    # then
    assert 'id="toolhub-guide-link"' in page.content.decode()
    assert "usage_guide" not in page.context
    guide = response.context["usage_guide"]
    assert "error" not in guide
    assert "Tools: 2" in guide["markdown"]
    assert "<h1>" in guide["html"]
    assert "orders_query" in guide["html"]


#
# Call log
#


def test_percentile_is_nearest_rank():
    """p50 and p95 use the nearest-rank rule."""
    # given
    values = [float(v) for v in range(1, 21)]
    # then
    assert (percentile(values, 50), percentile(values, 95), percentile([], 50)) == (10.0, 19.0, None)


def test_call_log_shows_per_tool_stats(owner_client, owner, instance):
    """The call log shows per-tool counts, error rate and p50/p95 over the filtered calls."""
    # given
    for duration in (1.0, 2.0, 3.0, 4.0):
        CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="a", status="ok", duration_ms=duration)
    CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="b", status="error", duration_ms=9.0)
    # when
    response = owner_client.get(reverse("admin:tools_app_calllog_changelist"))
    filtered = owner_client.get(reverse("admin:tools_app_calllog_changelist") + "?status__exact=error")
    # then
    stats = response.context["call_stats"]
    keys = ("tool_name", "count", "errors", "error_rate", "p50_ms", "p95_ms")
    rows = {tuple(row[key] for key in keys) for row in stats["tools"]}
    assert rows == {("a", 4, 0, 0.0, 2.0, 4.0), ("b", 1, 1, 100.0, 9.0, 9.0)}
    assert (stats["total"]["count"], stats["total"]["error_rate"]) == (5, 20.0)
    assert [r["tool_name"] for r in filtered.context["call_stats"]["tools"]] == ["b"]
    assert "Per tool (matching the filters)" in response.content.decode()


def test_call_stats_window_is_bounded(owner, instance):
    """Statistics cover at most the newest `window` calls and say when older ones were left out."""
    # given
    for duration in (1.0, 2.0, 3.0):
        CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="a", status="ok", duration_ms=duration)
    # when
    stats = call_stats(CallLog.objects.all(), window=2)
    # then
    assert stats["window"] == {"size": 2, "truncated": True, "calls": 2}
    assert stats["total"]["count"] == 2


def test_call_log_is_read_only(owner_client, owner, instance):
    """No add or change from the admin; a POST to a row's page changes nothing."""
    # given
    log = CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="a", status="ok", duration_ms=1.0)
    # when
    add = owner_client.get(reverse("admin:tools_app_calllog_add"))
    change = owner_client.post(reverse("admin:tools_app_calllog_change", args=[log.pk]), {"tool_name": "b"})
    # then
    assert add.status_code == 403
    assert change.status_code == 403
    log.refresh_from_db()
    assert log.tool_name == "a"


def test_call_log_row_page_is_viewable(owner_client, owner, instance):
    """A call's page opens read-only for its owner: the call's detail (tools_app/tests/admin/test_call_detail.py)."""
    # given
    log = CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="a", status="ok", duration_ms=1.0)
    # when
    response = owner_client.get(reverse("admin:tools_app_calllog_change", args=[log.pk]))
    # then
    assert response.status_code == 200
    assert re.search(r"<h1>Call of a</h1>", response.content.decode())


#
# Form texts (QA items 5, 7, 8)
#


def test_binding_of_another_users_tool_shows_the_models_message(
    client, superuser, owner, other_user, make_table, make_tool, instance
):
    """A superuser binding another user's tool to the owner's instance sees the model's reason."""
    # given
    theirs = make_tool(other_user, make_table(other_user), name="theirs")
    client.force_login(superuser)
    # when
    response = client.post(
        reverse("admin:tools_app_binding_add"), {"mcp_instance": instance.pk, "tool": theirs.pk, "enabled": "on"}
    )
    # then
    assert response.context["adminform"].form.errors["tool"] == [
        "Select a valid choice. That tool is not one of yours."
    ]
    assert Binding.objects.count() == 0


def test_slug_help_text_shows_the_endpoint_pattern(owner_client):
    """The slug's help text shows the endpoint's pattern; no placeholder an HTML page would take for a tag."""
    # when
    response = owner_client.get(reverse("admin:tools_app_mcpinstance_add"))
    # then
    html = response.content.decode()
    assert "URL segment of the endpoint /mcp/{slug}/: letters, digits, &#x27;-&#x27; and &#x27;_&#x27;." in html
    assert "<slug>" not in html


@pytest.mark.parametrize("value", ["-5", "0", "999"])
def test_max_result_bytes_below_minimum_has_one_message(owner_client, instance, value):
    """Every value under the minimum gets the same message, and nothing is saved."""
    # when
    response = owner_client.post(change_url(instance), instance_form(instance, max_result_bytes=value))
    # then
    assert response.context["adminform"].form.errors["max_result_bytes"] == [
        "Ensure this value is greater than or equal to 1000."
    ]
    instance.refresh_from_db()
    assert instance.max_result_bytes == 40_000


@pytest.mark.parametrize(
    ("url_name", "needs_object"),
    [
        ("tools_app_binding_changelist", False),
        ("tools_app_binding_add", False),
        ("tools_app_binding_change", "binding"),
        ("tools_app_apikey_changelist", False),
        ("tools_app_apikey_add", False),
        ("tools_app_apikey_change", "api_key"),
        ("tools_app_calllog_changelist", False),
        ("tools_app_calllog_change", "log"),
    ],
)
def test_pages_say_mcp_instance_not_mcp_instance(
    owner_client, owner, instance, bound, make_api_key, url_name, needs_object
):
    """Labels, column headers and filter titles say "MCP instance" (the field name would give "Mcp instance")."""
    # given
    api_key, _ = make_api_key(instance)
    log = CallLog.objects.create(owner=owner, mcp_instance=instance, tool_name="a", status="ok", duration_ms=1.0)
    objects = {"binding": bound[0], "api_key": api_key, "log": log}
    args = [objects[needs_object].pk] if needs_object else []
    # when
    response = owner_client.get(reverse(f"admin:{url_name}", args=args))
    # then
    html = response.content.decode()
    assert response.status_code == 200
    assert "MCP instance" in html
    assert re.findall(r"(?i)(?<![\w/_-])mcp instance", html.replace("MCP instance", "")) == []


def test_view_only_user_opens_its_instance_read_only(client, owner, instance):
    """With view permissions only, the instance page opens (read-only) instead of failing on a missing field."""
    # given
    viewers = Group.objects.create(name="viewers")
    viewers.permissions.set(Permission.objects.filter(codename="view_mcpinstance"))
    owner.groups.set([viewers])
    client.force_login(owner)
    # when
    response = client.get(change_url(instance))
    # then
    assert response.status_code == 200
    assert response.context["adminform"].form.fields == {}
    assert "max_result_bytes" in response.content.decode()


def test_old_admin_links_of_the_moved_models_redirect(owner_client, instance):
    """The MCP models' admin pages are under /admin/tools_app/ (docs/architecture.md, "History"): a bookmark of
    /admin/mcp_app/... lands on the same page."""
    # when
    change = owner_client.get(f"/admin/mcp_app/mcpinstance/{instance.pk}/change/")
    listing = owner_client.get("/admin/mcp_app/calllog/?status=error")
    # then
    assert (change.status_code, change["Location"]) == (301, f"/admin/tools_app/mcpinstance/{instance.pk}/change/")
    assert (listing.status_code, listing["Location"]) == (301, "/admin/tools_app/calllog/?status=error")
    assert owner_client.get(change["Location"]).status_code == 200


def test_instance_key_rate_limit_is_set_in_the_admin(owner_client, instance):
    """The instance page sets the rate per key (docs/rate-limits.md)."""
    response = owner_client.post(change_url(instance), instance_form(instance, key_rate_limit="120/minute"))
    assert response.status_code == 302
    instance.refresh_from_db()
    assert instance.key_rate_limit == "120/minute"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("fast", "'fast' is not a rate: write <count>/<period>, e.g. '600/minute', '10/second' or '100/5 minutes'."),
        ("0/second", "'0/second' allows no request: the count and the period must be at least 1."),
    ],
)
def test_instance_bad_key_rate_limit_is_a_form_error(owner_client, instance, value, message):
    """A bad rate is an error on the field, and nothing is saved."""
    response = owner_client.post(change_url(instance), instance_form(instance, key_rate_limit=value, name="Renamed"))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["key_rate_limit"] == [message]
    instance.refresh_from_db()
    assert (instance.name, instance.key_rate_limit) == ("Shop", "")


def test_help_texts_with_angle_brackets_read_as_written(client, owner, bound, instance):
    """The admin puts help texts into the page as HTML: toolhub's are plain text and show their <...> parts."""
    # given
    client.force_login(owner)
    # when
    page = client.get(change_url(instance)).content.decode()
    # then
    assert "as &lt;count&gt;/&lt;period&gt;: &#x27;120/minute&#x27;" in page
    assert "Blank: toolhub://tables/&lt;id&gt;[/&lt;path&gt;]." in page
    assert "toolhub://tables/[/]" not in page
