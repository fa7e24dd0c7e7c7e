"""What the call log keeps of a value (tools_app.execution.call_details): redacted, bounded, always JSON."""

import json
import random

import pytest

from tools_app.execution import call_details
from tools_app.execution.call_details import Recorded, is_credential_name, recorded, recorded_success, scrub

KEY = "thk_" + "x" * 43


@pytest.mark.parametrize(
    ("name", "credential"),
    [
        ("password", True),
        ("PASSWORD", True),
        ("access_token", True),
        ("clientSecret", True),
        ("X-Api-Key", True),
        ("apiKey", True),
        ("Authorization", True),
        ("session_id", True),
        ("private_key", True),
        ("max_tokens", False),
        ("author", False),
        ("keys", False),
        ("preview_keys", False),
        ("passenger", False),
        ("oauth", False),
    ],
)
def test_credential_names(name, credential):
    assert is_credential_name(name) is credential


def test_credentials_and_fields_are_redacted_at_any_depth():
    value = {
        "query": "x",
        "password": "hunter22",
        "nested": {"apiKey": {"v": "abc"}, "list": [{"ssn": "123-45-6789", "name": "ann"}]},
        "note": f"key {KEY} used; ssn 123-45-6789",
    }
    kept = recorded(value, max_bytes=4096, fields=frozenset({"ssn"}))
    assert json.loads(kept.text) == {
        "query": "x",
        "password": "[redacted]",
        "nested": {"apiKey": "[redacted]", "list": [{"ssn": "[redacted]", "name": "ann"}]},
        "note": "key [redacted] used; ssn [redacted]",
    }
    assert kept.truncated is False
    assert set(kept.secrets) == {"hunter22", "abc", "123-45-6789"}


def test_a_query_naming_a_redacted_field_loses_its_literals():
    kept = recorded({"query": "[?ssn=='123-45-6789' && n==`5000`].name"}, max_bytes=4096, fields=frozenset({"ssn"}))
    assert json.loads(kept.text) == {"query": "[?ssn=='[redacted]' && n==`\"[redacted]\"`].name"}
    untouched = recorded({"query": "[?ssnx=='1'].name"}, max_bytes=4096, fields=frozenset({"ssn"}))
    assert json.loads(untouched.text) == {"query": "[?ssnx=='1'].name"}


def test_a_long_list_is_cut_inside_its_structure_and_marked():
    kept = recorded([{"id": i, "name": "x" * 50} for i in range(100)], max_bytes=500)
    items = json.loads(kept.text)
    assert kept.truncated is True
    assert len(kept.text.encode()) <= 500
    assert items[:-1] == [{"id": i, "name": "x" * 50} for i in range(len(items) - 1)]
    assert items[-1] == f"[cut: {100 - (len(items) - 1)} more items]"


@pytest.mark.parametrize("seed", range(4))
def test_a_list_of_numbers_is_cut_as_item_by_item_at_every_room(seed):
    """A list of numbers (a page's ids) is cut from its text at once (call_details._cut_numbers): at every room, what
    is kept and its size are what cutting item by item keeps (_cut_container)."""
    rng = random.Random(seed)
    values = [rng.choice([rng.randrange(10 ** rng.randrange(1, 8)), rng.random(), None, True]) for _ in range(80)]
    for room in range(0, len(json.dumps(values)) + 60):
        kept = call_details._cut(values, room, 0)
        item_by_item = call_details._cut_container(list(enumerate(values)), room, 0, is_object=False)
        assert repr(kept) == repr(item_by_item), room


@pytest.mark.parametrize(
    ("first", "fields", "kept_first"),
    [
        ({"id": 0, "name": "x" * 50}, frozenset(), {"id": 0, "name": "x" * 50}),
        (
            {"id": 0, "name": "x" * 50, "api_key": "s3cr3t-value"},
            frozenset(),
            {"id": 0, "name": "x" * 50, "api_key": "[redacted]"},
        ),
        (
            {"id": 0, "name": "x" * 50, "ssn": "123-45-6789"},
            frozenset({"ssn"}),
            {"id": 0, "name": "x" * 50, "ssn": "[redacted]"},
        ),
        ({"id": 0, "name": f"key {KEY}"}, frozenset(), {"id": 0, "name": "key [redacted]"}),
    ],
    ids=["nothing to redact", "a credential key", "a redacted field", "an issued key"],
)
def test_a_cut_value_is_redacted_only_where_its_kept_part_needs_it(first, fields, kept_first):
    """A value over the bound is cut first; what the cut keeps is redacted as a value within the bound would be."""
    # given
    value = [first] + [{"id": i, "name": "x" * 50} for i in range(1, 100)]
    # when
    kept = recorded(value, max_bytes=500, fields=fields)
    # then
    items = json.loads(kept.text)
    assert (kept.truncated, len(kept.text.encode()) <= 500) == (True, True)
    assert items[0] == kept_first
    assert items[1:-1] == [{"id": i, "name": "x" * 50} for i in range(1, len(items) - 1)]
    assert items[-1] == f"[cut: {100 - (len(items) - 1)} more items]"
    assert "[redacted]" not in kept.text or kept_first != first


def test_a_long_string_keeps_its_start():
    kept = recorded({"a": "y" * 10_000, "b": 1}, max_bytes=300)
    value = json.loads(kept.text)
    assert value["a"].startswith("yyyy")
    assert value["a"].endswith("…[cut]")
    assert value["[cut]"] == "1 more keys"
    assert len(kept.text.encode()) <= 300


def test_what_cannot_be_stored_or_encoded_never_fails():
    assert json.loads(recorded({"b": "\ud800"}, max_bytes=300).text) == {"b": "\ud800"}
    deep: dict = {}
    inner = deep
    for _ in range(5000):
        inner["x"] = {}
        inner = inner["x"]
    assert recorded(deep, max_bytes=300, small=True).truncated is True
    assert recorded({"a": {1, 2}}, max_bytes=300).truncated is True


def test_scrub_replaces_secrets_and_keys_in_free_text():
    assert scrub(f"'123-45-6789' is not valid; {KEY}", ("123-45-6789",)) == "'[redacted]' is not valid; [redacted]"


#
# recorded_success: what the pipeline keeps of a successful call, with a fast path for the clean call
#


def _general(arguments, value, *, fields=frozenset(), sent_fields=None, text=None):
    """The steps recorded_success stands for, one by one (the pipeline's rule before the fast path)."""
    result = recorded(value, max_bytes=4096, fields=fields, text=text)
    sent_fields = fields if sent_fields is None else sent_fields
    sent = recorded(arguments, max_bytes=4096, fields=sent_fields, secrets=result.secrets, small=True)
    if sent.secrets and set(sent.secrets) - set(result.secrets):
        result = recorded(value, max_bytes=4096, fields=fields, secrets=sent.secrets)
    return sent, result


def _compact(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


SUCCESSES = {
    "clean": ({"query": "[?id==`42`] | [0]"}, {"id": 42, "total": 9.5}, frozenset()),
    "non-ascii": ({"query": "[?name=='Zoë']"}, [{"name": "Zoë", "city": "Kraków"}], frozenset()),
    "a password sent and echoed": ({"password": "hunter22", "q": 1}, {"echo": "hunter22 ok"}, frozenset()),
    "a key in the result": ({"q": "x"}, {"note": f"use {KEY}"}, frozenset()),
    "redact_fields": ({"query": "[?ssn=='123-45-6789']"}, [{"ssn": "123-45-6789", "name": "ann"}], frozenset({"ssn"})),
    "a result over the bound": ({"q": 1}, ["y" * 100 for _ in range(100)], frozenset()),
    "a lone surrogate": ({"q": "\ud800"}, {"a": "\udfff"}, frozenset()),
}


@pytest.mark.parametrize("case", SUCCESSES.values(), ids=SUCCESSES.keys())
@pytest.mark.parametrize("with_text", [True, False], ids=["text at hand", "no text"])
def test_recorded_success_keeps_what_the_general_steps_keep(settings, case, with_text):
    # given
    settings.TOOLHUB_CALL_RESULT_BYTES = settings.TOOLHUB_CALL_ARGUMENTS_BYTES = 4096
    arguments, value, fields = case
    text = _compact(value) if with_text else None

    # when
    sent, result = recorded_success(arguments, value, fields=fields, text=text)

    # then
    assert (sent, result) == _general(arguments, value, fields=fields, text=text)


def test_recorded_success_redacts_argument_names_in_the_arguments_and_their_values_in_the_result(settings):
    # given: `name` is an argument name to redact, not a field of the result
    settings.TOOLHUB_CALL_RESULT_BYTES = settings.TOOLHUB_CALL_ARGUMENTS_BYTES = 4096
    arguments, value = {"name": "alan", "limit": 2}, [{"name": "alan", "id": 2}, {"name": "ada", "id": 1}]
    for text in (_compact(value), None):
        # when
        sent, result = recorded_success(arguments, value, sent_fields=frozenset({"name"}), text=text)

        # then
        assert sent == Recorded('{"name":"[redacted]","limit":2}', False, ("alan",))
        assert result == Recorded('[{"name":"[redacted]","id":2},{"name":"ada","id":1}]', False, ("alan",))
        assert (sent, result) == _general(arguments, value, sent_fields=frozenset({"name"}), text=text)


def test_recorded_success_of_a_clean_call_is_the_texts_as_sent_and_answered():
    # given
    arguments, value = {"query": "[?name=='Zoë']"}, [{"name": "Zoë"}]

    # when
    sent, result = recorded_success(arguments, value, text='[{"name":"Zoë"}]')

    # then
    assert sent == Recorded('{"query":"[?name==\'Zoë\']"}', False, ())
    assert result == Recorded('[{"name":"Zoë"}]', False, ())
    assert (sent.size, result.size) == (27, 17)


def test_recorded_success_redacts_an_echoed_secret_from_the_result():
    # when
    sent, result = recorded_success({"password": "hunter22"}, {"echo": "hunter22 ok"}, text='{"echo":"hunter22 ok"}')

    # then
    assert sent == Recorded('{"password":"[redacted]"}', False, ("hunter22",))
    assert result == Recorded('{"echo":"[redacted] ok"}', False, ("hunter22",))
