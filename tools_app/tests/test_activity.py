"""The activity page (/admin/activity/, docs/activity.md): calls, errors and p95 per instance and per tool over
time, top tools, top error codes and refusals, counted in the database over one window, owner-scoped."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tools_app import activity, services
from tools_app.models import CallLog, RefusalCount

pytestmark = pytest.mark.django_db

# A fixed "now" in the middle of a 15-minute bucket: the 24 h window ends at 12:15 and starts at 12:15 the day before.
NOW = datetime(2026, 11, 27, 12, 7, 30, tzinfo=UTC)
URL = "/admin/activity/"


def log(owner, *, instance=None, tool="orders_query", at=NOW, ms=1.0, code=""):
    return CallLog.objects.create(
        owner=owner,
        mcp_instance=instance,
        tool_name=tool,
        status="error" if code else "ok",
        error_code=code,
        duration_ms=ms,
        created_at=at,
    )


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_window_is_aligned_on_whole_buckets():
    window = activity.WINDOWS["24h"]
    start, end = activity.window_bounds(window, NOW)
    assert (start, end) == (datetime(2026, 11, 26, 12, 15, tzinfo=UTC), datetime(2026, 11, 27, 12, 15, tzinfo=UTC))
    assert window.buckets == 96


def test_latency_bounds_are_ten_per_decade():
    bounds = activity.LATENCY_BOUNDS_MS
    assert bounds[:11] == (0.1, 0.126, 0.158, 0.2, 0.251, 0.316, 0.398, 0.501, 0.631, 0.794, 1.0)
    assert bounds[-1] == 100_000.0
    assert list(bounds) == sorted(set(bounds))


def test_p95_is_the_bound_of_the_bucket_holding_the_nearest_rank():
    # 19 calls in bucket 10 (≤ 1 ms) and 1 in bucket 20 (≤ 10 ms): rank ceil(0.95*20) = 19 -> 1 ms.
    assert activity.p95_bound({10: 19, 20: 1}) == 1.0
    # 18 and 2: rank 19 falls in bucket 20.
    assert activity.p95_bound({10: 18, 20: 2}) == 10.0
    # the open bucket reports the last bound
    assert activity.p95_bound({len(activity.LATENCY_BOUNDS_MS): 1}) == 100_000.0
    assert activity.p95_bound({}) is None


def test_counts_per_bucket_instance_tool_and_code(owner, make_instance):
    shop = make_instance(owner, slug="shop")
    blog = make_instance(owner, slug="blog")
    # bucket 95 (12:00-12:15): 3 calls on shop, one failed over a budget; bucket 94: 1 on blog, rate-limited
    log(owner, instance=shop, at=NOW, ms=0.9)
    log(owner, instance=shop, at=NOW - timedelta(minutes=7), ms=9.0)
    log(owner, instance=shop, at=NOW, ms=40.0, code="QUERY_TOO_EXPENSIVE", tool="orders_search")
    log(owner, instance=blog, at=NOW - timedelta(minutes=10), ms=2.0, code="RATE_LIMITED")
    log(owner, at=NOW - timedelta(hours=1), ms=1.0)  # an API call: bucket 91
    log(owner, at=NOW - timedelta(hours=25))  # before the window
    log(owner, at=NOW + timedelta(minutes=8))  # after its end (12:15)
    # when
    data = activity.activity(CallLog.objects.for_user(owner), activity.WINDOWS["24h"], NOW)
    # then
    assert len(data["labels"]) == 96
    assert data["labels"][0] == "2026-11-26 12:15"
    assert data["labels"][-1] == "2026-11-27 12:00"
    by_instance = {series["name"]: series for series in data["by_instance"]}
    assert list(by_instance) == ["shop", "(API and admin)", "blog"]
    assert by_instance["shop"]["calls"][95] == 3
    assert sum(by_instance["shop"]["calls"]) == 3
    assert by_instance["shop"]["errors"][95] == 1
    assert by_instance["shop"]["p95_ms"][95] == 50.1  # 40 ms falls in (39.8, 50.1]
    assert by_instance["shop"]["p95_ms"][94] is None
    assert by_instance["blog"]["calls"][94] == 1
    assert by_instance["blog"]["errors"][94] == 1
    assert by_instance["(API and admin)"]["calls"][91] == 1
    by_tool = {series["name"]: series["total"] for series in data["by_tool"]}
    assert by_tool == {"orders_query": 4, "orders_search": 1}
    assert data["top_tools"][0] == {"name": "orders_query", "calls": 4, "errors": 1, "error_rate": 25.0, "p95_ms": 10.0}
    assert data["top_errors"] == [{"code": "QUERY_TOO_EXPENSIVE", "calls": 1}, {"code": "RATE_LIMITED", "calls": 1}]
    assert data["refusals"]["budget"][95] == 1
    assert data["refusals"]["budget_total"] == 1
    assert data["refusals"]["rate_limited"][94] == 1
    assert data["refusals"]["rate_limited_total"] == 1
    assert data["total"] == {"calls": 5, "errors": 2, "error_rate": 40.0, "p95_ms": 50.1}


def test_more_series_than_drawn_add_up_as_other(owner):
    for index in range(activity.TOP_SERIES + 3):
        for _ in range(index + 1):
            log(owner, tool=f"tool_{index:02d}")
    data = activity.activity(CallLog.objects.for_user(owner), activity.WINDOWS["1h"], NOW)
    names = [series["name"] for series in data["by_tool"]]
    assert len(names) == activity.TOP_SERIES + 1
    assert names[-1] == "other"
    assert names[0] == f"tool_{activity.TOP_SERIES + 2:02d}"
    # the three least called tools: 1 + 2 + 3 calls
    assert data["by_tool"][-1]["total"] == 6
    assert data["by_tool"][-1]["calls"][-1] == 6


def test_the_statements_are_few_and_do_not_grow_with_rows(owner, instance):
    for minute in range(50):
        log(owner, instance=instance, at=NOW - timedelta(minutes=minute), tool=f"t{minute % 5}")
    with CaptureQueriesContext(connection) as queries:
        activity.activity(CallLog.objects.for_user(owner), activity.WINDOWS["1h"], NOW)
    assert len(queries) == 2  # the groups, the instances' names
    assert "GROUP BY" in queries.captured_queries[0]["sql"]


def test_an_owner_sees_only_its_calls_a_superuser_all(owner, other_user, superuser, make_instance):
    mine = make_instance(owner, slug="mine")
    theirs = make_instance(other_user, slug="theirs")
    log(owner, instance=mine, at=datetime.now(UTC))
    log(other_user, instance=theirs, at=datetime.now(UTC))
    log(other_user, instance=theirs, at=datetime.now(UTC))
    # an owner
    response = logged_in(owner).get(URL)
    assert response.status_code == 200
    data = response.context["data"]
    assert [series["name"] for series in data["by_instance"]] == ["mine"]
    assert data["total"]["calls"] == 1
    page = response.content.decode()
    assert "theirs" not in page
    assert [item["slug"] for item in response.context["instances"]] == ["mine"]
    # another owner's instance id behaves as absent
    response = logged_in(owner).get(URL, {"instance": theirs.pk})
    assert response.status_code == 200
    assert response.context["data"]["total"]["calls"] == 1
    assert f"No MCP instance with id &#x27;{theirs.pk}&#x27;: showing all your instances." in response.content.decode()
    # a superuser sees both
    response = logged_in(superuser).get(URL)
    names = {series["name"]: series["total"] for series in response.context["data"]["by_instance"]}
    assert names == {"theirs": 2, "mine": 1}
    response = logged_in(superuser).get(URL, {"instance": theirs.pk})
    assert response.context["data"]["total"]["calls"] == 2


def test_the_page_loads_chart_js_from_the_own_static_files(owner):
    page = logged_in(owner).get(URL).content.decode()
    assert '<script src="/static/toolhub/vendor/chartjs/chart.umd.min.js" defer></script>' in page
    assert '<script id="activity-data" type="application/json">' in page
    assert "cdn" not in page.lower()


def test_a_bad_window_is_named_and_the_default_used(owner):
    response = logged_in(owner).get(URL, {"window": "99y"})
    assert response.status_code == 200
    assert response.context["window"].key == "24h"
    assert "Unknown window &#x27;99y&#x27;: choose one of 1h, 6h, 24h, 7d, 30d." in response.content.decode()


def test_who_may_open_the_page(make_user, client):
    # anonymous: the admin's login
    response = client.get(URL)
    assert response.status_code == 302
    assert response.url.startswith("/admin/login/")
    # staff without the call log's view permission: 403
    bare = make_user("bare")
    bare.groups.clear()
    assert logged_in(bare).get(URL).status_code == 403


def test_the_admin_index_links_to_the_page(owner):
    page = logged_in(owner).get(reverse("admin:index")).content.decode()
    assert 'href="/admin/activity/"' in page


#
# Requests refused by a rate limit before the pipeline (RefusalCount, services.refusals)
#


def refused(owner, *, instance=None, scope="mcp_key", at=NOW, count=1):
    return RefusalCount.objects.create(
        owner=owner, mcp_instance=instance, scope=scope, minute=at.replace(second=0, microsecond=0), count=count
    )


def test_requests_refused_by_a_rate_limit_are_counted_per_bucket(owner, other_user, make_instance):
    shop = make_instance(owner, slug="shop")
    theirs = make_instance(other_user, slug="theirs")
    # bucket 95 (12:00-12:15): shop's key refused 3 + 4 times (two flushes of one minute); bucket 94: the owner's
    # own API requests twice
    refused(owner, instance=shop, count=3)
    refused(owner, instance=shop, count=4)
    refused(owner, scope="user", at=NOW - timedelta(minutes=10), count=2)
    refused(owner, instance=shop, at=NOW - timedelta(hours=25), count=50)  # before the window
    refused(other_user, instance=theirs, count=9)  # another owner's
    # when
    data = activity.activity(
        CallLog.objects.for_user(owner), activity.WINDOWS["24h"], NOW, refused=RefusalCount.objects.for_user(owner)
    )
    # then
    requests = data["refusals"]["requests"]
    assert (len(requests), requests[95], requests[94], sum(requests)) == (96, 7, 2, 9)
    assert data["refusals"]["requests_total"] == 9
    assert data["total"]["calls"] == 0  # no call-log row for them


def test_the_refused_requests_cost_one_statement(owner, instance):
    for minute in range(50):
        log(owner, instance=instance, at=NOW - timedelta(minutes=minute))
        refused(owner, instance=instance, at=NOW - timedelta(minutes=minute))
    with CaptureQueriesContext(connection) as queries:
        data = activity.activity(
            CallLog.objects.for_user(owner), activity.WINDOWS["1h"], NOW, refused=RefusalCount.objects.for_user(owner)
        )
    assert data["refusals"]["requests_total"] == 50
    assert len(queries) == 3  # the calls' groups, the instances' names, the refused requests' groups
    assert "GROUP BY" in queries.captured_queries[-1]["sql"]


def test_the_page_shows_an_owners_refused_requests_and_a_superuser_everyones(
    owner, other_user, superuser, make_instance
):
    mine = make_instance(owner, slug="mine")
    theirs = make_instance(other_user, slug="theirs")
    now = datetime.now(UTC)
    refused(owner, instance=mine, at=now, count=3)
    refused(owner, scope="user", at=now, count=1)
    refused(other_user, instance=theirs, at=now, count=20)
    # an owner: its instance's and its own API requests; one instance: that instance's
    assert logged_in(owner).get(URL).context["data"]["refusals"]["requests_total"] == 4
    page = logged_in(owner).get(URL, {"instance": mine.pk})
    assert page.context["data"]["refusals"]["requests_total"] == 3
    assert '<strong id="activity-requests-refused">3</strong> requests over a rate limit' in page.content.decode()
    # a superuser: everyone's
    assert logged_in(superuser).get(URL).context["data"]["refusals"]["requests_total"] == 24
    assert logged_in(superuser).get(URL, {"instance": theirs.pk}).context["data"]["refusals"]["requests_total"] == 20


def test_the_page_writes_the_refusals_this_process_counted_first(owner, instance):
    # given: refusals counted but not yet written (a flush is not due)
    services.refusals.clear()
    services.refusals.count(owner_id=owner.pk, instance_id=instance.pk, scope="mcp_key")
    services.refusals.flush()
    for _ in range(4):
        services.refusals.count(owner_id=owner.pk, instance_id=instance.pk, scope="mcp_key")
    assert not services.refusals.due()
    assert RefusalCount.objects.get().count == 1
    # when
    data = logged_in(owner).get(URL).context["data"]
    # then
    assert data["refusals"]["requests_total"] == 5
    assert sorted(RefusalCount.objects.values_list("count", flat=True)) == [1, 4]
    assert services.refusals.pending == {}
