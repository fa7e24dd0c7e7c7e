"""The registry's ranking choices, on small built indexes (no database): word pairs of names, and requests
that ask for several tools at once. The figures behind them are in bench/registry/README.md."""

import pytest

from tools_app.kernel.limits import SEARCH_MAX_SCORED_PARTS, SEARCH_QUERY_MAX_CHARS
from tools_app.models import Tool
from tools_app.registry import embedding, search
from tools_app.registry.scope import CatalogEntry
from tools_app.registry.search import build_index


def index_of(specs: dict[str, str]) -> search.Index:
    entries = []
    for number, (name, description) in enumerate(specs.items(), 1):
        tool = Tool(id=number, name=name, type="external", description=description, input_schema={"type": "object"})
        entries.append(CatalogEntry(name, description, tool))
    return build_index(entries)


def ranked(index: search.Index, query: str, limit: int = 5) -> list[str]:
    return [hit.doc.name for hit in index.bm25(query, limit)]


CLOCKS = {
    "world_clock.get_time_zone": "Look up the time zone of a city, with its offset from UTC and daylight saving rules.",
    "irrigation.zone_time": "Set the watering time of a garden zone.",
}


def test_a_word_pair_of_a_name_in_the_query_ranks_that_tool_first():
    """The words "time zone" are a pair of words in one name only: that tool comes first, although both names hold both
    words (the shorter tool wins on single words alone)."""
    # when
    hits = index_of(CLOCKS).bm25("time zone of Cape Town", 5)
    # then
    assert [(hit.doc.name, round(hit.score, 4)) for hit in hits] == [
        ("world_clock.get_time_zone", 0.5583),
        ("irrigation.zone_time", 0.3748),
    ]
    assert hits[0].match_reason == "keywords: time, zone in name"


def test_without_the_pair_weight_single_words_decide(monkeypatch):
    """The pair is what decides the order above."""
    monkeypatch.setattr(search, "NAME_PAIR_WEIGHT", 0.0)
    # when / then
    assert ranked(index_of(CLOCKS), "time zone of Cape Town") == ["irrigation.zone_time", "world_clock.get_time_zone"]


def test_word_pairs_do_not_cross_a_query_without_known_words():
    """A query of unknown words finds nothing, pairs or not."""
    # when / then
    assert ranked(index_of(CLOCKS), "zebra giraffe") == []


@pytest.mark.parametrize("query", ["getUserProfile", "user profile", "get the user's profile", "user_profile"])
def test_identifier_parts_match_words_in_any_spelling(query):
    """A camelCase or snake_case name is found by its words, and by itself."""
    index = index_of(
        {
            "getUserProfile": "Return a person's account details.",
            "user_settings.update": "Change the settings of an account.",
            "profile_photo.upload": "Upload a picture.",
        }
    )
    # when / then
    assert ranked(index, query)[0] == "getUserProfile"


# A catalogue where a request's first half (money) drowns its second (a text message): many money tools match
# more of the request's words than the one tool that sends texts.
MONEY_AND_TEXTS = {
    "currency.convert": "Convert euros, yen and other currencies at the bank rate.",
    "bank.exchange": "Exchange euros for yen at your bank's rate, from your account.",
    "account.convert_balance": "Convert an account balance from euros to yen at the day's rate.",
    "fx.quote": "The bank rate to convert euros into yen.",
    "travel_money.order": "Order yen or euros from the bank at the travel rate, paid from your account.",
    "card.fees": "Fees of converting euros or yen with a card at a bank.",
    "sms.send": "Send a text to a phone number; a text longer than 160 characters is split into several messages, "
    "and the delivery report arrives later by callback.",
    "contacts.lookup": "Find the phone number of a contact.",
    "ocr.read": "Read the text in an image.",
    "phone.call": "Call a phone number.",
    "calendar.add": "Add an event to a calendar.",
}
TWO_REQUESTS = "Convert 250 euros into yen at the bank rate for my account. Then text the amount to my phone."


def test_a_request_for_two_tools_finds_both_in_the_top_five():
    """The second request's tool gets a place after the whole request's first three; each part's best tool not
    yet placed is named with its part."""
    index = index_of(MONEY_AND_TEXTS)
    # when
    hits = index.bm25(TWO_REQUESTS, 5)
    # then
    assert index.request_parts(TWO_REQUESTS, index._bm25_raw(TWO_REQUESTS)[2]) == [
        "Convert 250 euros into yen at the bank rate for my account.",
        "Then text the amount to my phone.",
    ]
    assert [(hit.doc.name, round(hit.score, 4)) for hit in hits] == [
        ("account.convert_balance", 0.314),
        ("bank.exchange", 0.2657),
        ("currency.convert", 0.2591),
        ("fx.quote", 0.2322),
        ("sms.send", 0.1623),
    ]
    assert (
        hits[4].match_reason
        == 'keywords: text, phone in description; best for the part "Then text the amount to my phone."'
    )
    assert hits[3].match_reason.endswith(
        '; best for the part "Convert 250 euros into yen at the bank rate for my account."'
    )


def test_without_splitting_the_second_request_is_not_in_the_top_five(monkeypatch):
    monkeypatch.setattr(search, "MULTI_LEAD", 0)
    # when
    found = ranked(index_of(MONEY_AND_TEXTS), TWO_REQUESTS)
    # then
    assert found == ["account.convert_balance", "bank.exchange", "currency.convert", "fx.quote", "travel_money.order"]


@pytest.mark.parametrize(
    "query",
    [
        "Convert 250 euros into yen at the bank rate for my account and text the amount",  # "and" alone: one request
        "Convert euros into yen. Then convert yen into euros.",  # parts that are the whole request's words
        "Convert euros. Then yen.",  # parts of one known word each
    ],
)
def test_requests_that_are_not_split(query):
    index = index_of(MONEY_AND_TEXTS)
    # when / then
    assert index.request_parts(query, index._bm25_raw(query)[2]) == []


def test_a_request_of_thousands_of_parts_scores_at_most_the_cap(monkeypatch):
    """An attacker's 10,000 characters of "and then" parts: the whole request plus at most SEARCH_MAX_SCORED_PARTS parts
    are scored (the work is counted, not timed: timings flake on a shared machine)."""
    index = index_of(MONEY_AND_TEXTS)
    calls = []
    original = index._bm25_raw
    monkeypatch.setattr(index, "_bm25_raw", lambda text: calls.append(len(text)) or original(text))
    query = ("convert euros bank rate and then text phone number and then " * 200)[:SEARCH_QUERY_MAX_CHARS]
    assert len(query) == SEARCH_QUERY_MAX_CHARS
    assert len(search._PART_SPLIT.split(query)) > 300
    # when
    hits = index.bm25(query, 50)
    # then
    assert len(calls) == 1 + SEARCH_MAX_SCORED_PARTS == 9
    assert calls[0] == SEARCH_QUERY_MAX_CHARS
    assert max(calls[1:]) < 40
    assert len(hits) == len(MONEY_AND_TEXTS) - 1  # every tool but calendar.add shares a word


@pytest.mark.parametrize(("lead", "fifth"), [(3, "sms.send"), (0, "fx.quote")])
def test_hybrid_places_each_part_of_a_request_too(db, monkeypatch, lead, fifth):
    """hybrid ranks by its own score, and places the parts' tools the same way (parts scored by bm25, in the
    context of the hybrid score: no further query vectors)."""
    if not embedding.available():
        pytest.skip("the embedding extra is not installed (pip install -r requirements-embedding.txt)")
    monkeypatch.setattr(search, "MULTI_LEAD", lead)
    # when
    hits = index_of(MONEY_AND_TEXTS).hybrid(TWO_REQUESTS, 5)
    # then
    assert [hit.doc.name for hit in hits[:3]] == ["account.convert_balance", "currency.convert", "bank.exchange"]
    assert hits[4].doc.name == fifth
    assert "sms.send" not in [hit.doc.name for hit in hits[:4]]
    if lead:
        assert hits[4].match_reason.endswith('; best for the part "Then text the amount to my phone."')
