"""The regex search method: linear-time matching, Python `re` results for ordinary patterns, clear refusals.

Catastrophic backtracking must be impossible: a pattern like `(a|aa)+$` over a long text answers at once
with the correct result instead of pinning a CPU (SPEC §5: search under 200 ms).
"""

import re
import signal
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools_app.kernel.errors import ToolError
from tools_app.kernel.patterns import compile_pattern
from tools_app.models import Tool
from tools_app.registry import get_index, search_tools
from tools_app.registry.scope import UserScope

LONG_DESCRIPTION = "a" * 1000 + "!"  # descriptions hold at most 1,024 characters
LONG_PARAMETER_TEXT = "a" * 5000 + "!"


@contextmanager
def at_most(seconds: int):
    """Fail (instead of hanging) when the block runs longer than `seconds`: Python's re checks signals while it
    backtracks, so the alarm interrupts a runaway match. The bound is generous; the block takes milliseconds."""

    def expired(signum, frame):
        raise AssertionError(f"the search took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def text_tools(owner, make_tool):
    """A tool with long runs of 'a' (the classic catastrophic input), a short one, and a Chinese one."""
    return {
        "long.text": make_tool(
            owner,
            None,
            type="external",
            name="long.text",
            description=LONG_DESCRIPTION,
            metadata={"category": "text"},
            input_schema={
                "type": "object",
                "properties": {"text": {"type": "string", "description": LONG_PARAMETER_TEXT}},
            },
        ),
        "get_data": make_tool(
            owner, None, type="external", name="get_data", description="Read the data.", metadata={"category": "data"}
        ),
        "orders.cn": make_tool(
            owner,
            None,
            type="external",
            name="orders.cn",
            description="查询订单数据，返回订单号 ١٢٣\u3000和金额。\n",
            metadata={"category": "shop", "tags": ["订单", "Ünïcode"]},
        ),
    }


def search(owner, pattern, limit=10):
    return search_tools(scope=UserScope(owner), query=pattern, method="regex", limit=limit)


def matched(result):
    """{tool_name: [fields]} from the results' match reasons."""
    prefix = "pattern matched "
    return {hit["tool_name"]: hit["match_reason"].removeprefix(prefix).split(", ") for hit in result["results"]}


ALL_FIELDS_OF = {
    "long.text": ["name", "category", "parameters", "description", "parameter descriptions"],
    "get_data": ["name", "category", "description"],
    "orders.cn": ["name", "category", "tags", "description"],
}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # Every field of long.text ends with "!" or "t": only fields ending in "a" match.
        (r"((a+))+$", {"get_data": ["name", "category"]}),
        (r"(a+)+$", {"get_data": ["name", "category"]}),
        (r"(a|aa)+$", {"get_data": ["name", "category"]}),
        (r"^(a|a?)+$", {}),
        (r"(a*)*b", {}),
        # A repetition that can be empty matches at the end of every non-empty field.
        (r"(a|a)*$", ALL_FIELDS_OF),
        (r"(a|a?)+$", ALL_FIELDS_OF),
        # Fields ending in a word character (Unicode, as in Python: "Ünïcode" is a word).
        (
            r"(\w+\s?)+$",
            {
                "long.text": ["name", "category", "parameters"],
                "get_data": ["name", "category"],
                "orders.cn": ["name", "category", "tags"],
            },
        ),
        (r"(.*a){12}", {"long.text": ["description", "parameter descriptions"]}),
    ],
)
def test_catastrophic_patterns_answer_at_once_with_the_right_result(text_tools, owner, pattern, expected):
    """Patterns that backtrack exponentially in Python's re run in linear time and give the correct matches.

    Measured: each of these takes under 5 ms over this catalogue (Python's re: minutes or more).
    """
    # when
    with at_most(10):
        result = search(owner, pattern)
    # then
    assert matched(result) == expected


def test_catastrophic_pattern_over_a_large_catalogue(owner, make_tool):
    """200 tools with long texts: the evil pattern still answers at once, matching what it should."""
    # given
    for number in range(200):
        make_tool(owner, None, type="external", name=f"t{number}", description="a" * 1000 + ("!" if number % 2 else ""))
    # when
    with at_most(10):
        result = search(owner, r"(a|aa)+$", limit=50)
    # then
    assert result["count"] == 50
    assert {hit["tool_name"] for hit in result["results"]} <= {f"t{n}" for n in range(0, 200, 2)}
    assert {hit["match_reason"] for hit in result["results"]} == {"pattern matched description"}


def python_re_matches(owner, pattern):
    """What Python's re finds, field by field, over the same catalogue (the reference for ordinary patterns)."""
    compiled = re.compile(pattern, re.IGNORECASE)
    found = {}
    for doc in get_index(UserScope(owner)).docs:
        fields = [name for name, text in doc.fields.items() if text and compiled.search(text)]
        if fields:
            found[doc.name] = fields
    return found


@pytest.mark.parametrize(
    "pattern",
    [
        "data",
        r"get_da",
        r"^orders\.",
        r"\.cn$",
        r"DATA\b",
        r"\w+据",  # \w covers Chinese characters, as in Python
        r"订单\w{2}",
        r"^[\w.]+$",
        r"\d{3}",  # Arabic-Indic digits are \d in Python
        r"订单号\s\d",
        r"\s和",  # U+3000 IDEOGRAPHIC SPACE is \s
        r"\W和",
        r"[^\s\d]{2}数据",
        r"[\u4e00-\u9fff]{4}",
        r"\u67e5\u8be2",
        r"\N{CJK UNIFIED IDEOGRAPH-8BA2}单",
        r"金额。$",  # $ also matches before a final newline
        r"金额。\Z",
        r"(?m)^查询",
        r"(?s)数据.*额",
        r"a{,3}!",
        r"ünï",  # case-insensitive beyond ASCII
        r"r(?#a comment)ead",
        r"(?P<word>read) the",
        r"[]a]{4}",
        r"t{2,}|x",
        r"(?u)data",
        r"(?iu:DATA)",
        r"(?-i:Read)",
    ],
)
def test_ordinary_patterns_match_like_python_re(text_tools, owner, pattern):
    """Ordinary patterns keep Python's re semantics (Unicode classes, $ before a final newline, inline flags)."""
    # when
    result = search(owner, pattern)
    # then
    assert matched(result) == python_re_matches(owner, pattern)


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(a)\1", "backreference"),
        (r"(?P<x>a)(?P=x)", "backreference"),
        (r"(?=data)", "look-around"),
        (r"(?<!x)data", "look-around"),
        (r"(?>a+)", "atomic"),
        (r"a++", "possessive"),
        (r"(?x) d a t a", "flag"),
        (r"[\W\d]", r"\W or \S inside [...]"),
        (r"(a{1000}){1000}", "too large"),
    ],
)
def test_patterns_needing_backtracking_are_refused_clearly(text_tools, owner, pattern, says):
    """Constructs a linear-time engine cannot run are INVALID_QUERY saying which, and nothing is written."""
    # given
    uses_before = list(Tool.objects.order_by("pk").values_list("use_count", flat=True))
    # when
    with pytest.raises(ToolError) as caught:
        search(owner, pattern)
    # then
    assert caught.value.code == "INVALID_QUERY"
    assert says in caught.value.message
    assert repr(pattern) in caught.value.message
    assert list(Tool.objects.order_by("pk").values_list("use_count", flat=True)) == uses_before


def test_an_expensive_pattern_stops_at_the_time_budget(text_tools, owner, monkeypatch):
    """Matching stops past REGEX_TIME_BUDGET with INVALID_QUERY saying so (a large counted repetition costs
    seconds over thousands of long tools even in linear time)."""
    # given
    monkeypatch.setattr("tools_app.registry.search.REGEX_TIME_BUDGET", -1.0)
    # when
    with pytest.raises(ToolError) as caught:
        search(owner, r"e.{900}z")
    # then
    assert caught.value.code == "INVALID_QUERY"
    assert caught.value.message == (
        "The pattern 'e.{900}z' is too costly to match against 3 tools (stopped after -1 s); "
        "use smaller repetition counts or a more specific pattern."
    )


#
# The translation from Python's syntax to RE2's, against Python's re itself
#

ATOMS = [
    "a", "B", "数", "据", "é", "1", " ", "!", ".", r"\.", r"\w", r"\W", r"\d", r"\D", r"\s", r"\S", "[a-c]", "[^a1]",
    r"[\d!]", r"[^\s数]", r"[\w.]", "[]a]", r"\u6570", r"\x41", r"\101", r"\n", "^", r"\A",
]  # fmt: skip
TEXT_ALPHABET = "aAbBc1١ _!.\n\u3000数据éÉ"


@st.composite
def python_patterns(draw, depth=0):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            inner = draw(python_patterns(depth=depth + 1))
            atom = draw(st.sampled_from(["({})", "(?:{})", "(?i:{})", "({}|b)", "(?m:{}$)", "(?-m:{}$)"]))
            atom = atom.format(inner)
        else:
            atom = draw(st.sampled_from(ATOMS))
        if atom not in ("^", r"\A"):
            atom += draw(st.sampled_from(["", "", "*", "+", "?", "{2}", "{,2}", "{1,}", "*?", "+?"]))
        parts.append(atom)
    if depth == 0 and draw(st.integers(0, 3)) == 0:
        parts.insert(0, "(?m)")
    if depth == 0:
        # Only at the end: `$` becomes (?:\n?\z), which consumes a final newline that Python's `$` leaves for
        # what follows it (only a pattern matching a newline after `$` can tell the difference).
        parts.append(draw(st.sampled_from(["", "", "$", r"\Z"])))
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(pattern=python_patterns(), texts=st.lists(st.text(TEXT_ALPHABET, max_size=12), min_size=1, max_size=6))
def test_translated_patterns_match_exactly_what_python_re_matches(pattern, texts):
    """Random patterns over Unicode text: RE2 running to_re2(pattern) finds a match where Python's re does
    (fullmatch is only used on tool names, which hold no newline)."""
    expected = re.compile(pattern, re.IGNORECASE)
    compiled = compile_pattern(pattern)
    for text in texts:
        assert (compiled.search(text) is not None) == (expected.search(text) is not None), (pattern, text)
        if "\n" not in text:
            assert (compiled.fullmatch(text) is not None) == (expected.fullmatch(text) is not None), (pattern, text)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("(?m:a$)", "a\nb"),  # multiline inside the group: a at the end of a line
        ("(?m:a$)|b$", "b\n"),  # outside it, `$` still matches before a final newline
        ("(?m:a$)|b$", "b\nc"),  # ... and not before an inner one
        ("(?m)(?-m:a$)", "a\nb"),  # switched off inside a scoped group of a multiline pattern
        ("(?m)(?-m:a$)|b$", "b\nc"),  # ... and on again after it
        ("((?m:a$))b$", "a\nb"),
        ("(?#m)a$", "a\nb"),  # a comment sets nothing
    ],
)
def test_scoped_multiline_flags_match_like_python_re(pattern, text):
    """`$` follows the m flag of the group it is in, as in Python's re."""
    # when
    found = compile_pattern(pattern).search(text) is not None
    # then
    assert found == (re.search(pattern, text, re.IGNORECASE) is not None)
