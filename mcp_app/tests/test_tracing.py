"""OpenTelemetry spans of one MCP tools/call, caught by the SDK's in-memory exporter.

The MCP request's trace context (`traceparent` in params._meta) is the parent of the SDK's `tools/call`
span, under which the pipeline's `toolhub.call` span holds a span per stage, the JMESPath evaluation and
each database statement of the record. With tracing off nothing is recorded at all.
"""

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcp_app.tests.mcp_harness import Harness, rpc_body
from tools_app.kernel import telemetry

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"

_exporter = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(_exporter))


@pytest.fixture
def spans():
    """Tracing on for the test, into the in-memory exporter; off again after it."""
    _exporter.clear()
    telemetry.enable_tracing(_provider)
    yield _exporter
    telemetry.enable_tracing(None)
    _exporter.clear()


def _tree(finished) -> dict:
    """{span name: parent span's name (or the remote parent's id)} and the trace ids seen."""
    by_id = {span.context.span_id: span for span in finished}
    parents = {}
    for span in finished:
        parent = span.parent
        if parent is None:
            parents[span.name] = None
        elif parent.span_id in by_id:
            parents.setdefault(span.name, by_id[parent.span_id].name)
        else:
            parents[span.name] = f"remote:{parent.span_id:016x}"
    return parents


def _call(harness: Harness, key: str, *, meta: dict | None = None):
    params = {"name": "orders_query", "arguments": {"query": "[?status=='paid'].id"}}
    if meta is not None:
        params["_meta"] = meta
    body = rpc_body("tools/call", params)
    return harness.post("shop", body, key=key)


@pytest.fixture(params=["document", "rows"])
def storage(request, settings):
    """How `served`'s table is stored (ask for it before `served`): a document's query runs in jmespath.search,
    a rows table's compiles to SQL and has no such span (its statement's span is the execute stage's child)."""
    settings.TOOLHUB_NEW_TABLE_STORAGE = request.param
    return request.param


def _check_tree(finished, storage: str) -> None:
    tree = _tree(finished)
    assert tree["tools/call orders_query"] == f"remote:{PARENT_ID}"
    assert tree["toolhub.call"] == "tools/call orders_query"
    for stage in ("toolhub.call.authorize", "toolhub.call.execute", "toolhub.call.classify", "toolhub.call.record"):
        assert tree[stage] == "toolhub.call", stage
    assert tree["POST mcp"] is None
    statements = [span for span in finished if span.name.startswith("db ")]
    execute = next(span for span in finished if span.name == "toolhub.call.execute")
    queried = [span for span in statements if span.parent.span_id == execute.context.span_id]
    assert queried  # the table's version and data (a document), or the compiled statement (rows)
    if storage == "document":
        assert tree["jmespath.search"] == "toolhub.call.execute"
    else:
        assert "jmespath.search" not in tree
    record = next(span for span in finished if span.name == "toolhub.call.record")
    assert any(span.parent.span_id == record.context.span_id for span in statements)
    assert all(span.attributes["db.system"] in ("sqlite", "postgresql") for span in statements)
    # The call's spans are all in the caller's trace; the HTTP request's span has a trace of its own.
    call_spans = [span for span in finished if span.name != "POST mcp"]
    assert {f"{span.context.trace_id:032x}" for span in call_spans} == {TRACE_ID}
    call = next(span for span in finished if span.name == "toolhub.call")
    assert dict(call.attributes) == {
        "toolhub.surface": "mcp",
        "toolhub.tool": "orders_query",
        "toolhub.instance": "shop",
    }


def test_one_tools_call_makes_the_expected_span_tree(storage, served, spans):
    reply = _call(Harness(), served["key"], meta={"traceparent": TRACEPARENT})
    assert reply.json()["result"]["structuredContent"] == {"result": [1]}
    _check_tree(spans.get_finished_spans(), storage)


@pytest.mark.django_db(transaction=True)
def test_the_tree_holds_on_the_database_thread_pool(storage, served, spans):
    """Production's hops run on a thread pool: the context (span, request id) goes with each hop."""
    reply = _call(Harness(db_threads=2), served["key"], meta={"traceparent": TRACEPARENT})
    assert reply.json()["result"]["structuredContent"] == {"result": [1]}
    _check_tree(spans.get_finished_spans(), storage)


def test_without_a_traceparent_the_call_joins_the_request_span(served, spans):
    _call(Harness(), served["key"])
    tree = _tree(spans.get_finished_spans())
    assert (tree["POST mcp"], tree["tools/call orders_query"], tree["toolhub.call"]) == (
        None,
        "POST mcp",
        "tools/call orders_query",
    )


def test_a_malformed_traceparent_is_ignored(served, spans):
    reply = _call(Harness(), served["key"], meta={"traceparent": "00-zz-not-a-trace-01"})
    assert reply.json()["result"]["structuredContent"] == {"result": [1]}
    assert _tree(spans.get_finished_spans())["tools/call orders_query"] == "POST mcp"


def test_tracing_off_records_nothing(served):
    _exporter.clear()
    assert telemetry.tracing_enabled() is False
    _call(Harness(), served["key"], meta={"traceparent": TRACEPARENT})
    assert _exporter.get_finished_spans() == ()
    assert telemetry.span("anything") is telemetry.span("else")  # one shared do-nothing context


def test_api_requests_are_spans_continuing_a_traceparent_header(served, owner, spans):
    from tests.api_helpers import client_for

    response = client_for(owner).post(
        f"/api/tools/{served['tool'].pk}/call/",
        {"arguments": {"query": "length(@)"}},
        format="json",
        HTTP_TRACEPARENT=TRACEPARENT,
    )
    assert response.status_code == 200
    tree = _tree(spans.get_finished_spans())
    assert tree["POST api"] == f"remote:{PARENT_ID}"
    assert tree["toolhub.call"] == "POST api"
