"""Client ID Metadata Document fetches are bounded: one deadline for the whole fetch, enforced by the
clock; a byte cap on all that is read; a cap on fetches in flight per worker that refuses at once; and no
database connection held while a fetch waits. The documents come from a real local HTTPS server."""

import socket
import threading
import time

import pytest
from django.db import connection
from oauth2_provider import cimd as library
from oauth2_provider.models import AccessToken, Grant, RefreshToken, get_application_model

from oauth_app import cimd
from oauth_app.cimd import ToolhubMetadataFetcher
from oauth_app.models import ClientDocument
from oauth_app.tests.support import CALLBACK
from oauth_app.tests.test_oauth import document
from tools_app.kernel.limits import CIMD_MAX_HEADER_BYTES

Application = get_application_model()
DEADLINE = 1.0  # the `documents` fixture's CIMD_FETCH_TIMEOUT_SECONDS


def nothing_stored() -> dict:
    return {
        "clients": Application.objects.count(),
        "documents": ClientDocument.objects.count(),
        "grants": Grant.objects.count(),
        "access": AccessToken.objects.count(),
        "refresh": RefreshToken.objects.count(),
    }


NOTHING = {"clients": 0, "documents": 0, "grants": 0, "access": 0, "refresh": 0}


def token_request(client, client_id: str):
    return client.post(
        "/oauth/token/",
        {"grant_type": "authorization_code", "code": "c", "redirect_uri": CALLBACK, "client_id": client_id},
    )


def test_a_slow_drip_document_is_cut_at_the_deadline(client, db, documents):
    # given: the whole response, headers included, one byte every half second; a server warmed up (its first
    # request pays for imports)
    documents.drips["/drip.json"] = 0.5
    client_id = documents.url("/drip.json")
    assert token_request(client, "unknown").status_code == 401

    # when: an anonymous token request names it
    began = time.monotonic()
    answer = token_request(client, client_id)
    took = time.monotonic() - began

    # then
    assert answer.status_code == 401
    assert answer.json()["error"] == "invalid_client"
    assert took < DEADLINE + 0.5
    assert documents.sent["/drip.json"] <= 4
    assert nothing_stored() == NOTHING


def test_the_fetcher_stops_a_drip_by_the_clock_and_says_so(db, documents):
    documents.drips["/drip.json"] = 0.1
    began = time.monotonic()
    with pytest.raises(library.CIMDError) as refused:
        ToolhubMetadataFetcher().fetch(documents.url("/drip.json"))
    took = time.monotonic() - began
    assert DEADLINE - 0.05 < took < DEADLINE + 0.5
    assert "limit 1 s" in str(refused.value)
    assert ClientDocument.objects.count() == 0


def test_an_endless_document_is_cut_at_the_byte_cap(db, documents, settings, monkeypatch):
    # given: a body with no end, as fast as it can be read
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 10}
    documents.floods.add("/flood.json")
    cap = settings.OAUTH2_PROVIDER["CIMD_MAX_DOCUMENT_SIZE"] + CIMD_MAX_HEADER_BYTES
    budgets = []

    class Recorded(cimd._Budget):
        def __init__(self, **fields):
            super().__init__(**fields)
            budgets.append(self)

    monkeypatch.setattr(cimd, "_Budget", Recorded)

    # when
    began = time.monotonic()
    with pytest.raises(library.CIMDError) as refused:
        ToolhubMetadataFetcher().fetch(documents.url("/flood.json"))
    took = time.monotonic() - began

    # then: refused without waiting for the deadline, having read no more than the cap
    assert took < 2
    assert "exceeds the maximum allowed size" in str(refused.value)
    assert [budget.max_bytes for budget in budgets] == [cap]
    assert budgets[0].received <= cap
    assert ClientDocument.objects.count() == 0


def test_a_slow_dns_lookup_counts_in_the_deadline(db, documents, monkeypatch):
    # given: a resolver that takes 5 s
    real = socket.getaddrinfo

    def slow(*args, **kwargs):
        time.sleep(5)
        return real(*args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    documents.documents["/ok.json"] = document(documents.url("/ok.json"))

    # when
    began = time.monotonic()
    with pytest.raises(library.CIMDError) as refused:
        ToolhubMetadataFetcher().fetch(documents.url("/ok.json"))

    # then
    assert time.monotonic() - began < DEADLINE + 0.5
    assert "could not resolve the client_id host within 1 s" in str(refused.value)
    assert documents.hits.get("/ok.json") is None


def test_fetches_over_the_per_worker_cap_are_refused_at_once(db, documents, settings):
    # given: two fetches in flight (the cap), each held by a slow drip
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_MAX_CONCURRENT_FETCHES": 2}
    for name in ("a", "b", "c"):
        documents.drips[f"/{name}.json"] = 0.2
    results: dict[str, object] = {}

    def resolve(name: str) -> None:
        results[name] = library.resolve_cimd_application(documents.url(f"/{name}.json"), request=None)

    slow = [threading.Thread(target=resolve, args=(name,)) for name in ("a", "b")]
    for thread in slow:
        thread.start()
    while sum(documents.hits.get(f"/{name}.json", 0) for name in ("a", "b")) < 2:
        time.sleep(0.01)

    # when: a third one, while both are held
    began = time.monotonic()
    third = library.resolve_cimd_application(documents.url("/c.json"), request=None)
    took = time.monotonic() - began
    for thread in slow:
        thread.join()

    # then: refused without queueing and without connecting; the held ones end at their deadline
    assert third is None
    assert took < 0.1
    assert documents.hits.get("/c.json") is None
    assert results == {"a": None, "b": None}
    assert nothing_stored() == NOTHING


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the connection pool is PostgreSQL's")
def test_no_database_connection_is_held_while_a_document_is_fetched(db, documents, monkeypatch):
    # given: a request thread that has used the database (outside any transaction)
    documents.drips["/drip.json"] = 0.1
    seen = {}
    real_urlopen = cimd.urllib3.HTTPSConnectionPool.urlopen

    def spy(self, *args, **kwargs):
        seen["connection while fetching"] = connection.connection
        return real_urlopen(self, *args, **kwargs)

    monkeypatch.setattr(cimd.urllib3.HTTPSConnectionPool, "urlopen", spy)

    def request() -> None:
        try:
            Application.objects.filter(client_id="x").exists()
            seen["before"] = connection.connection
            with pytest.raises(library.CIMDError):
                ToolhubMetadataFetcher().fetch(documents.url("/drip.json"))
        finally:
            connection.close()

    # when
    thread = threading.Thread(target=request)
    thread.start()
    thread.join()

    # then
    assert seen["before"] is not None
    assert seen["connection while fetching"] is None
