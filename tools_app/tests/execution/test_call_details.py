"""What the call log keeps of a value (tools_app.execution.call_details): redacted, bounded, always JSON."""

import json

import pytest

from tools_app.execution.call_details import is_credential_name, recorded, scrub

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
