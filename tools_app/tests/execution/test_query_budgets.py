"""Per-call budgets: adversarial queries end with QUERY_TOO_EXPENSIVE naming the
limit, on every surface, and are recorded; concurrent calls per key and per user are bounded (RATE_LIMITED)."""

import threading
import time

import jmespath
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from mcp_app.tests.mcp_harness import Harness
from tests.api_helpers import client_for
from tools_app.data_access import budget as budget_module
from tools_app.data_access.budget import Limits, enforced
from tools_app.data_access.query import run_query
from tools_app.execution import call_limits as budgets_module
from tools_app.execution.call_limits import call_slots, default_limits, limits_for
from tools_app.execution.pipeline import CallTarget
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.models import CallLog, McpInstance

RECORDS = [{"id": n, "customer": f"customer-{n:03d}", "tags": ["a", "b"], "total": n * 1.5} for n in range(200)]
# The payloads name element, size and nesting limits: their CPU budget is roomy, so that on a loaded machine the
# elapsed-time backstop (CPU budget + WALL_GRACE) cannot stop them first. Promptness is measured in CPU time.
LIMITS = Limits(cpu_ms=120_000, max_elements=300_000, max_bytes=8 * 1024 * 1024)
PROMPT_CPU_SECONDS = 2.0
DOUBLING = "[@,@]" + "|[@,@]" * 16  # 125 bytes: builds 17 small lists of shared references, 2^17 copies walked

#
# The evaluator (data_access): each payload stops promptly with the limit named
#

PAYLOADS = [
    (DOUBLING, "element budget of 300,000 elements (the result is larger)"),
    (DOUBLING + "|to_string(@)", "element budget of 300,000 elements (the argument of to_string is larger)"),
    (DOUBLING + "|length(to_string(@))", "(the argument of to_string is larger)"),
    ("[@,@]" + "|[@,@][]" * 30, "element budget of 300,000 elements built"),
    (DOUBLING + "|sort_by(@, &to_string(@))", "(the argument of to_string is larger)"),
    (f"({DOUBLING}) == ({DOUBLING})", "(an operand of == is larger)"),
    (f"contains({DOUBLING}, `[1]`)", "(the array given to contains is larger)"),
    (" | ".join(["[*].[@,@,@,@,@,@,@,@] | []"] * 4) + " | length(@)", "element budget of 300,000 elements built"),
    (
        "join('', [*].customer)" + "|[@,@]" * 14 + "[]" * 13 + "|join('', @)",
        "size budget of 8,388,608 bytes of strings",
    ),
    ("[" * 150 + "id" + "]" * 150, "nesting limit of 100 levels"),
    ("!" * 150 + "id", "nesting limit of 100 levels"),
    ("[0]" + ".id" * 5000, "query length limit of 10,000 characters"),
]


@pytest.mark.parametrize(("expression", "named"), PAYLOADS)
def test_adversarial_query_is_too_expensive_naming_the_limit(expression, named):
    """Each payload ends with QUERY_TOO_EXPENSIVE whose message names the limit and how to narrow the query."""
    # given
    data = [dict(record) for record in RECORDS]
    started = time.thread_time()
    # when
    with pytest.raises(ToolError) as caught, enforced(LIMITS):
        run_query(expression, data)
    # then
    assert caught.value.code == ErrorCode.QUERY_TOO_EXPENSIVE
    assert named in caught.value.message
    assert "Narrow the query" in caught.value.message
    assert time.thread_time() - started < PROMPT_CPU_SECONDS


def test_cpu_time_budget_stops_a_long_evaluation():
    """Work within the element budget but over the CPU time stops at the CPU-time budget, promptly."""
    # given
    data = [dict(record) for record in RECORDS] * 50
    limits = Limits(cpu_ms=50, max_elements=50_000_000, max_bytes=512 * 1024 * 1024)
    expression = " | ".join(["[*].[@,@,@,@] | []"] * 3) + " | [*].to_string(@) | length(@)"
    # when
    with pytest.raises(ToolError) as caught, enforced(limits) as used:
        run_query(expression, data)
    # then
    assert caught.value.code == ErrorCode.QUERY_TOO_EXPENSIVE
    assert "CPU-time budget of 50 ms" in caught.value.message
    # Promptly, counted in work rather than in seconds (a busy machine stretches CPU time): finishing builds
    # 3,580,010 elements; within 50 ms of CPU this machine builds about 340,000.
    assert used.spent < 1_000_000


def test_the_cpu_time_budget_is_looked_at_every_check_interval(monkeypatch):
    """The first look at the CPU clock past the deadline stops the evaluation: with a clock that advances 1 ms
    per look (read once at the start), a 50 ms budget stops at the 51st check, the first to read more than
    50 ms, however fast or busy the machine is."""
    # given
    looks = []

    def one_ms_per_look():
        looks.append(None)
        return len(looks) / 1000

    monkeypatch.setattr(budget_module, "_thread_time", one_ms_per_look)
    monkeypatch.setattr(budget_module, "_monotonic", lambda: 0.0)  # the wall-clock backstop never fires
    monkeypatch.setattr(budget_module, "YIELD_AFTER_MS", 10_000.0)  # no heavy lane: only the deadline
    data = list(range(100_000))
    limits = Limits(cpu_ms=50, max_elements=50_000_000, max_bytes=512 * 1024 * 1024)
    # when
    with pytest.raises(ToolError) as caught, enforced(limits):
        run_query("[*].[@, @] | [] | [*].[@, @] | [] | length(@)", data)
    # then
    assert caught.value.code == ErrorCode.QUERY_TOO_EXPENSIVE
    assert "(used 51 ms of CPU" in caught.value.message
    assert len(looks) == 1 + 51


def test_huge_slice_is_charged_per_element():
    """A slice copies its elements: over the element budget it is refused."""
    # given
    data = list(range(5_000))
    limits = Limits(cpu_ms=2000, max_elements=10_000, max_bytes=8 * 1024 * 1024)
    # when
    with pytest.raises(ToolError) as caught, enforced(limits):
        run_query("[::1][::1][::1][0:99999999999]", data)
    # then
    assert caught.value.code == ErrorCode.QUERY_TOO_EXPENSIVE
    assert "element budget of 10,000 elements built" in caught.value.message


@pytest.mark.parametrize(
    "expression",
    [
        "[?total > `100`].{id: id, customer: customer}",
        "sort_by(@, &customer)[*].id",
        "max_by(@, &total).id",
        "[*].tags[] | length(@)",
        "join(',', [*].customer)",
        "to_string([:3])",
        "map(&id, @)",
        "[?contains(tags, 'a')] | length(@)",
        "{s: sort_by(@, &total)[:2].id, m: merge({a: `1`}, {b: `2`}), k: keys([0]), v: values([0])}",
        "[*].[id, id][] | reverse(@)[:4]",
        "[?[id, id] == [id, id]].id | [:3]",
    ],
)
def test_honest_queries_answer_as_the_interpreter_does(expression):
    """Within the budget, results are exactly jmespath's."""
    # given
    data = [dict(record) for record in RECORDS]
    # when
    with enforced(LIMITS):
        result = run_query(expression, data)
    # then
    assert result == jmespath.search(expression, data)


def test_error_message_of_a_type_error_quotes_a_bounded_value():
    """A function's type error quotes a few levels of the value, never the whole shared graph."""
    # given: 2^41 references once walked, which printing the value whole would do
    expression = "[@,@]" + "|[@,@]" * 40 + "|abs(@)"
    # when
    with pytest.raises(ToolError) as caught, enforced(Limits(cpu_ms=2000, max_elements=10**9, max_bytes=2**40)):
        run_query(expression, [1])
    # then
    assert caught.value.code == ErrorCode.INVALID_QUERY
    assert "In function abs(), invalid type for value: [[[[...], [...]], [[...], [...]]]" in caught.value.message


#
# Limits: server defaults, instance overrides, validation
#


def test_limits_come_from_settings_and_instance_overrides(settings):
    """An instance's override replaces only its own limit; empty fields keep the server default."""
    # given
    settings.TOOLHUB_QUERY_CPU_MS = 1234
    settings.TOOLHUB_QUERY_MAX_ELEMENTS = 50_000
    settings.TOOLHUB_QUERY_MAX_BYTES = 70_000
    target = CallTarget(owner_id=1, instance_id=2, query_max_elements=2_000)
    # when
    limits = limits_for(target)
    # then
    assert (limits.cpu_ms, limits.max_elements, limits.max_bytes) == (1234, 2_000, 70_000)
    assert default_limits() == limits_for(CallTarget(owner_id=1))


@pytest.mark.parametrize(
    ("field", "value"),
    [("query_cpu_ms", 5), ("query_cpu_ms", 30_001), ("query_max_elements", 999), ("query_max_bytes", 9_999)],
)
def test_instance_budget_out_of_range_is_refused(owner, make_instance, field, value):
    """Budget overrides have bounds; an instance outside them is not saved."""
    # given
    instance = make_instance(owner)
    setattr(instance, field, value)
    # when
    with pytest.raises(ValidationError) as caught:
        instance.full_clean()
    # then
    assert field in caught.value.message_dict
    assert McpInstance.objects.get(pk=instance.pk).__dict__[field] is None


#
# Every surface: the typed error, and the call recorded with its code
#


@pytest.fixture
def doubling_tool(owner, make_table, make_tool):
    table = make_table(owner, name="small", data=[dict(record) for record in RECORDS[:20]])
    return make_tool(owner, table, name="orders_query")


def _assert_recorded(surface: str) -> None:
    log = CallLog.objects.get()
    assert (log.surface, log.status, log.error_code) == (surface, "error", "QUERY_TOO_EXPENSIVE")
    assert "element budget of" in log.error_message


def test_mcp_call_over_budget_is_query_too_expensive(owner, doubling_tool, instance, bind, make_api_key):
    """Over MCP: an isError result 'QUERY_TOO_EXPENSIVE: ...' naming the instance's limit; recorded."""
    # given
    instance.query_max_elements = 100_000
    instance.save()
    bind(instance, doubling_tool)
    key = make_api_key(instance)[1]
    # when
    reply = Harness().call("shop", key, "orders_query", {"query": DOUBLING})
    # then
    result = reply["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("QUERY_TOO_EXPENSIVE: ")
    assert "element budget of 100,000 elements" in result["content"][0]["text"]
    _assert_recorded("mcp")


def test_api_call_over_budget_is_400_query_too_expensive(owner, doubling_tool, settings):
    """Over the API: 400 {"error": "QUERY_TOO_EXPENSIVE"} naming the server's default limit; recorded."""
    # given
    settings.TOOLHUB_QUERY_MAX_ELEMENTS = 200_000
    # when
    response = client_for(owner).post(
        f"/api/tools/{doubling_tool.pk}/call/", {"arguments": {"query": DOUBLING}}, format="json"
    )
    # then
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "QUERY_TOO_EXPENSIVE"
    assert "element budget of 200,000 elements" in body["message"]
    assert body["details"]["limit"] == "element budget"
    _assert_recorded("api")


def test_admin_try_it_over_budget_shows_query_too_expensive(client, owner, doubling_tool):
    """In the admin's try-it: the code and message on the page; recorded."""
    # given
    client.force_login(owner)
    # when
    response = client.post(reverse("admin:tools_app_tool_try", args=[doubling_tool.pk]), {"query": DOUBLING})
    # then
    outcome = response.context["outcome"]
    assert (outcome["ok"], outcome["code"]) == (False, "QUERY_TOO_EXPENSIVE")
    assert "element budget of 5,000,000 elements" in response.content.decode()
    _assert_recorded("admin")


def test_registry_search_query_over_the_length_limit(owner, make_tool, settings):
    """A registry tool is bounded too: a search query longer than the limit is QUERY_TOO_EXPENSIVE."""
    # given
    settings.TOOLHUB_QUERY_MAX_LENGTH = 100
    tool = make_tool(owner, None, type="search_tools", name="find_tools")
    # when
    response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": {"query": "x" * 101}}, format="json")
    # then
    assert response.status_code == 400
    assert response.json()["error"] == "QUERY_TOO_EXPENSIVE"
    assert "query length limit of 100 characters" in response.json()["message"]


@pytest.mark.parametrize("storage", ["document", "rows"])
def test_select_over_budget_is_query_too_expensive_on_a_document(owner, make_table, make_tool, settings, storage):
    """On a document, select walks its collection and its keys: both are charged to the call's budget. On rows, a
    select by the collection's key field reads only the keys' rows (`key IN (...)` on its index): nothing to walk,
    so the same call answers."""
    # given
    settings.TOOLHUB_QUERY_MAX_ELEMENTS = 1_000
    table = make_table(owner, name="big", data=[{"id": n} for n in range(1_500)], storage=storage)
    tool = make_tool(owner, table, type="select", name="by_id")
    # when
    response = client_for(owner).post(f"/api/tools/{tool.pk}/call/", {"arguments": {"keys": [1]}}, format="json")
    # then
    if storage == "document":
        assert (response.status_code, response.json()["error"]) == (400, "QUERY_TOO_EXPENSIVE")
    else:
        assert (response.status_code, response.json()["result"]) == (200, {"items": [{"id": 1}], "not_found": []})


#
# Concurrency
#


def test_calls_over_the_key_limit_wait_then_are_refused(settings):
    """A third call of a key limited to two waits TOOLHUB_CONCURRENCY_WAIT_MS, then RATE_LIMITED names it."""
    # given
    settings.TOOLHUB_CONCURRENT_CALLS_PER_KEY = 2
    settings.TOOLHUB_CONCURRENCY_WAIT_MS = 100
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with call_slots.held(user_id=None, api_key_id=77):
            held.set()
            release.wait(5)

    holders = [threading.Thread(target=hold) for _ in range(2)]
    for thread in holders:
        thread.start()
    while call_slots.running("api_key", 77) < 2:
        time.sleep(0.005)
    started = time.monotonic()
    # when
    with pytest.raises(ToolError) as caught, call_slots.held(user_id=None, api_key_id=77):
        pass
    waited = time.monotonic() - started
    release.set()
    for thread in holders:
        thread.join()
    # then
    assert caught.value.code == ErrorCode.RATE_LIMITED
    assert "concurrency limit is 2 expensive calls" in caught.value.message
    assert "TOOLHUB_CONCURRENT_CALLS_PER_KEY" in caught.value.message
    assert 0.09 <= waited < 1.0
    assert call_slots.running("api_key", 77) == 0


def test_a_slot_freed_while_waiting_is_taken(settings):
    """A call waiting for a slot runs as soon as one is released."""
    # given
    settings.TOOLHUB_CONCURRENT_CALLS_PER_USER = 4
    settings.TOOLHUB_CONCURRENCY_WAIT_MS = 2000
    release = threading.Event()

    def hold() -> None:
        with call_slots.held(user_id=5, api_key_id=None):
            release.wait(5)

    holders = [threading.Thread(target=hold) for _ in range(4)]
    for thread in holders:
        thread.start()
    while call_slots.running("user", 5) < 4:
        time.sleep(0.005)
    threading.Timer(0.05, release.set).start()
    # when
    with call_slots.held(user_id=5, api_key_id=None):
        running = call_slots.running("user", 5)
    for thread in holders:
        thread.join()
    # then
    assert 1 <= running <= 4
    assert call_slots.running("user", 5) == 0


@pytest.fixture
def heavy_after_no_time(monkeypatch):
    """Every evaluation that reaches a clock check is heavy (normally after 20 ms of CPU)."""
    monkeypatch.setattr(budget_module, "YIELD_AFTER_MS", 0.0)


@pytest.fixture
def wide_tool(owner, make_table, make_tool):
    table = make_table(owner, name="wide", data=[{"id": n} for n in range(6_000)])
    return make_tool(owner, table, name="wide_query")


def test_api_expensive_call_over_the_user_limit_is_429_and_recorded(owner, wide_tool, settings, heavy_after_no_time):
    """Over the API, an expensive call over its user's limit is RATE_LIMITED: 429 with Retry-After, recorded."""
    # given
    settings.TOOLHUB_CONCURRENT_CALLS_PER_USER = 1
    settings.TOOLHUB_CONCURRENCY_WAIT_MS = 10
    # when
    with call_slots.held(user_id=owner.pk, api_key_id=None):
        response = client_for(owner).post(
            f"/api/tools/{wide_tool.pk}/call/", {"arguments": {"query": "[*].id | length(@)"}}, format="json"
        )
    # then
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "1"
    assert response.json()["error"] == "RATE_LIMITED"
    assert "concurrency limit is 1 expensive calls" in response.json()["message"]
    log = CallLog.objects.get()
    assert (log.surface, log.status, log.error_code) == ("api", "error", "RATE_LIMITED")
    assert call_slots.running("user", owner.pk) == 0


def test_light_calls_take_no_slot(owner, doubling_tool, settings):
    """A call that stays light runs even while its user is at the limit of expensive calls."""
    # given
    settings.TOOLHUB_CONCURRENT_CALLS_PER_USER = 1
    settings.TOOLHUB_CONCURRENCY_WAIT_MS = 10
    # when
    with call_slots.held(user_id=owner.pk, api_key_id=None):
        response = client_for(owner).post(
            f"/api/tools/{doubling_tool.pk}/call/", {"arguments": {"query": "[0].id"}}, format="json"
        )
    # then
    assert (response.status_code, response.json()) == (200, {"result": 0})


def test_an_expensive_call_gives_its_slot_back(owner, wide_tool, heavy_after_no_time):
    """A heavy call holds a slot only while it runs."""
    # when
    response = client_for(owner).post(
        f"/api/tools/{wide_tool.pk}/call/", {"arguments": {"query": "[*].id | length(@)"}}, format="json"
    )
    # then
    assert (response.status_code, response.json()) == (200, {"result": 6_000})
    assert call_slots.running("user", owner.pk) == 0
    assert not budget_module._heavy_lane.locked()


def test_mcp_expensive_call_over_the_key_limit(
    owner, wide_tool, instance, bind, make_api_key, settings, heavy_after_no_time
):
    """Over MCP, an expensive call over its key's concurrency limit is an isError result RATE_LIMITED."""
    # given
    settings.TOOLHUB_CONCURRENT_CALLS_PER_KEY = 1
    settings.TOOLHUB_CONCURRENCY_WAIT_MS = 10
    bind(instance, wide_tool)
    api_key, key = make_api_key(instance)
    # when
    with call_slots.held(user_id=None, api_key_id=api_key.pk):
        reply = Harness().call("shop", key, "wide_query", {"query": "[*].id | length(@)"})
    # then
    text = reply["result"]["content"][0]["text"]
    assert reply["result"]["isError"] is True
    assert text.startswith("RATE_LIMITED: Too many expensive calls at once for this API key")
    assert CallLog.objects.get().error_code == "RATE_LIMITED"


#
# Heavy callers: a caller whose call was heavy or over budget turns heavy sooner for a while
#


def test_a_heavy_caller_is_remembered_for_a_while(monkeypatch):
    """remember_heavy: that key (or, without a key, that user) gets the short threshold for
    HEAVY_MEMORY_SECONDS; other callers keep the default (None)."""
    # given
    now = [1_000.0]
    monkeypatch.setattr(budgets_module, "_clock", lambda: now[0])
    # when
    call_slots.remember_heavy(user_id=1, api_key_id=7)
    call_slots.remember_heavy(user_id=2, api_key_id=None)
    # then
    assert call_slots.yield_after_ms(user_id=1, api_key_id=7) == budget_module.SUSPECT_YIELD_AFTER_MS == 2.0
    assert call_slots.yield_after_ms(user_id=1, api_key_id=8) is None
    assert call_slots.yield_after_ms(user_id=1, api_key_id=None) is None
    assert call_slots.yield_after_ms(user_id=2, api_key_id=None) == 2.0
    assert call_slots.yield_after_ms(user_id=None, api_key_id=None) is None
    now[0] += budgets_module.HEAVY_MEMORY_SECONDS
    assert call_slots.yield_after_ms(user_id=1, api_key_id=7) == 2.0
    now[0] += 0.001
    assert call_slots.yield_after_ms(user_id=1, api_key_id=7) is None


def test_heavy_callers_remembered_are_bounded(monkeypatch):
    """At most MAX_HEAVY_CALLERS are remembered: the one remembered longest ago is forgotten first; expired
    ones are dropped when another is remembered."""
    # given
    now = [1_000.0]
    monkeypatch.setattr(budgets_module, "_clock", lambda: now[0])
    monkeypatch.setattr(budgets_module, "MAX_HEAVY_CALLERS", 3)
    for key in (1, 2, 3):
        call_slots.remember_heavy(user_id=None, api_key_id=key)
    # when
    call_slots.remember_heavy(user_id=None, api_key_id=1)  # 1 again: now the latest
    call_slots.remember_heavy(user_id=None, api_key_id=4)
    # then
    assert call_slots._heavy_until == {("api_key", 3): 1_010.0, ("api_key", 1): 1_010.0, ("api_key", 4): 1_010.0}
    now[0] += 5
    call_slots.remember_heavy(user_id=None, api_key_id=5)
    now[0] += 6  # 3, 1 and 4 expired
    call_slots.remember_heavy(user_id=None, api_key_id=6)
    assert call_slots._heavy_until == {("api_key", 5): 1_015.0, ("api_key", 6): 1_021.0}


@pytest.fixture
def heavy_only_when_remembered(monkeypatch):
    """No evaluation is heavy by YIELD_AFTER_MS; a remembered heavy caller's is heavy at its first check."""
    monkeypatch.setattr(budget_module, "YIELD_AFTER_MS", 10_000.0)
    monkeypatch.setattr(budgets_module, "SUSPECT_YIELD_AFTER_MS", 0.0)


def test_mcp_key_over_budget_turns_heavy_sooner(
    owner, doubling_tool, wide_tool, instance, bind, make_api_key, settings, heavy_only_when_remembered
):
    """Over MCP: after a call over budget, the same key's next evaluation is heavy at once (so it needs the
    key's slot: RATE_LIMITED while the slot is held), while another key's same call stays light."""
    # given
    settings.TOOLHUB_CONCURRENCY_WAIT_MS = 10
    bind(instance, doubling_tool)
    bind(instance, wide_tool)
    (flooder, flooder_key), (other, other_key) = make_api_key(instance), make_api_key(instance)
    over = Harness().call("shop", flooder_key, "orders_query", {"query": DOUBLING})
    assert over["result"]["content"][0]["text"].startswith("QUERY_TOO_EXPENSIVE: ")
    # when
    with call_slots.held(user_id=None, api_key_id=flooder.pk), call_slots.held(user_id=None, api_key_id=other.pk):
        flooder_reply = Harness().call("shop", flooder_key, "wide_query", {"query": "[*].id | length(@)"})
        other_reply = Harness().call("shop", other_key, "wide_query", {"query": "[*].id | length(@)"})
    # then
    assert flooder_reply["result"]["isError"] is True
    assert flooder_reply["result"]["content"][0]["text"].startswith("RATE_LIMITED: Too many expensive calls")
    assert other_reply["result"]["isError"] is False
    assert other_reply["result"]["structuredContent"] == {"result": 6_000}
    assert list(CallLog.objects.order_by("pk").values_list("api_key_id", "error_code")) == [
        (flooder.pk, "QUERY_TOO_EXPENSIVE"),
        (flooder.pk, "RATE_LIMITED"),
        (other.pk, ""),
    ]


def test_api_user_turns_heavy_sooner_after_a_heavy_call(owner, wide_tool, settings, monkeypatch):
    """Over the API (no key: the user is the caller): a call that became heavy marks its user, whose next
    evaluation is heavy at once even with the default threshold back (429 while the user's slot is held)."""
    # given
    settings.TOOLHUB_CONCURRENT_CALLS_PER_USER = 1
    settings.TOOLHUB_CONCURRENCY_WAIT_MS = 10
    api = client_for(owner)
    url = f"/api/tools/{wide_tool.pk}/call/"
    monkeypatch.setattr(budget_module, "YIELD_AFTER_MS", 0.0)
    assert api.post(url, {"arguments": {"query": "[*].id | length(@)"}}, format="json").status_code == 200
    monkeypatch.setattr(budget_module, "YIELD_AFTER_MS", 10_000.0)
    monkeypatch.setattr(budgets_module, "SUSPECT_YIELD_AFTER_MS", 0.0)
    # when
    with call_slots.held(user_id=owner.pk, api_key_id=None):
        response = api.post(url, {"arguments": {"query": "[*].id | max(@)"}}, format="json")  # not cached
    # then
    assert (response.status_code, response.json()["error"]) == (429, "RATE_LIMITED")
    assert list(CallLog.objects.order_by("pk").values_list("status", "error_code")) == [
        ("ok", ""),
        ("error", "RATE_LIMITED"),
    ]
