"""Registry ranking choices of issue 17, on small built indexes (no database): word pairs of names, and requests
that ask for several tools at once. The figures behind them are in bench/registry/README.md."""

import pytest

from tools_app.models import Tool
from tools_app.registry import search
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
    """"time zone" is a pair of words in one name only: that tool comes first, although both names hold both
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
