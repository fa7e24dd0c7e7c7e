"""manage.py tool_docs: YAML descriptions and examples in and out (SPEC §5, seed 000)."""

import io

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from tools_app.models import Tool


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("tool_docs", *args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), str(exc)
    return out.getvalue(), err.getvalue(), None


@pytest.fixture
def documented_tools(owner, table, make_tool):
    return {
        "query": make_tool(owner, table, name="query_orders", description="Old description."),
        "list": make_tool(owner, table, type="get_all_data", name="list_orders", description="All orders."),
    }


def test_import_applies_descriptions_and_examples(owner, documented_tools, tmp_path):
    """Both files apply; the tool's model validation accepts them."""
    # given
    (tmp_path / "tool_descriptions.yaml").write_text("query_orders: |\n  Query orders.\n  Multi-line.\n")
    (tmp_path / "tool_examples.yaml").write_text(
        'query_orders:\n  - |\n    # paid orders\n    query_orders(query="[?paid]")\n'
    )
    # when
    out, err, error = run("import", "--user", owner.username, "--dir", str(tmp_path))
    # then
    assert error is None
    assert err == ""
    assert "updated 1 description(s) and 1 example list(s); 0 problem(s)." in out
    tool = Tool.objects.get(pk=documented_tools["query"].pk)
    assert tool.description == "Query orders.\nMulti-line."
    assert tool.metadata["examples"] == ['# paid orders\nquery_orders(query="[?paid]")']


def test_import_reports_problems_and_applies_the_rest(owner, documented_tools, tmp_path):
    """Unknown names and invalid examples are reported; valid entries still apply; exit is an error."""
    # given
    (tmp_path / "tool_descriptions.yaml").write_text("list_orders: Every order.\nghost_tool: Nobody.\n")
    (tmp_path / "tool_examples.yaml").write_text(
        "query_orders:\n  - 'query_orders(query='\nlist_orders:\n  - list_orders()\n"
    )
    # when
    out, err, error = run("import", "--user", owner.username, "--dir", str(tmp_path))
    # then
    assert error == "2 problem(s) reported; everything else was applied."
    assert "problem: tool_descriptions.yaml: unknown tool 'ghost_tool'" in err
    assert "problem: tool_examples.yaml: 'query_orders': metadata.examples[0] is not valid Python" in err
    assert Tool.objects.get(pk=documented_tools["list"].pk).description == "Every order."
    assert Tool.objects.get(pk=documented_tools["list"].pk).metadata["examples"] == ["list_orders()"]
    assert "examples" not in Tool.objects.get(pk=documented_tools["query"].pk).metadata


def test_import_reports_missing_and_broken_files(owner, documented_tools, tmp_path):
    """A missing file and broken YAML are reported; nothing changes."""
    # given
    (tmp_path / "tool_examples.yaml").write_text("query_orders: [unclosed\n")
    # when
    _, err, error = run("import", "--user", owner.username, "--dir", str(tmp_path))
    # then
    assert error == "2 problem(s) reported; everything else was applied."
    assert "tool_descriptions.yaml: file not found" in err
    assert "tool_examples.yaml: broken YAML (line 2)" in err
    assert Tool.objects.get(pk=documented_tools["query"].pk).description == "Old description."


def test_import_reports_a_description_the_model_refuses(owner, documented_tools, tmp_path):
    """A description over 1,024 characters is reported and the tool keeps its old one."""
    # given
    (tmp_path / "tool_descriptions.yaml").write_text(yaml.safe_dump({"query_orders": "x" * 1100}))
    (tmp_path / "tool_examples.yaml").write_text("{}\n")
    # when
    _, err, error = run("import", "--user", owner.username, "--dir", str(tmp_path))
    # then
    assert error == "1 problem(s) reported; everything else was applied."
    assert "'query_orders': description: At most 1024 characters (got 1100)." in err
    assert Tool.objects.get(pk=documented_tools["query"].pk).description == "Old description."


def test_dry_run_writes_nothing(owner, documented_tools, tmp_path):
    """--dry-run validates and counts but leaves the tools as they were."""
    # given
    (tmp_path / "tool_descriptions.yaml").write_text("query_orders: New text.\n")
    (tmp_path / "tool_examples.yaml").write_text("query_orders:\n  - query_orders(query='a')\n")
    # when
    out, _, error = run("import", "--user", owner.username, "--dir", str(tmp_path), "--dry-run")
    # then
    assert error is None
    assert "would update 1 description(s) and 1 example list(s)" in out
    tool = Tool.objects.get(pk=documented_tools["query"].pk)
    assert tool.description == "Old description."
    assert "examples" not in tool.metadata


def test_export_then_import_round_trips(owner, other_user, make_tool, documented_tools, tmp_path):
    """Export writes the seed formats (block scalars) for the user's tools only; importing them is a no-op."""
    # given
    make_tool(other_user, None, type="external", name="theirs", description="Not exported.")
    documented_tools["query"].metadata = {"examples": ["# all\nquery_orders(query='@')"]}
    documented_tools["query"].save()
    # when
    _, _, error = run("export", "--user", owner.username, "--dir", str(tmp_path))
    descriptions = (tmp_path / "tool_descriptions.yaml").read_text()
    examples = (tmp_path / "tool_examples.yaml").read_text()
    # then
    assert error is None
    assert descriptions == "list_orders: |\n  All orders.\nquery_orders: |\n  Old description.\n"
    assert examples == "query_orders:\n- |\n  # all\n  query_orders(query='@')\n"
    out, err, error = run("import", "--user", owner.username, "--dir", str(tmp_path))
    assert (error, err) == (None, "")
    assert Tool.objects.get(pk=documented_tools["query"].pk).metadata["examples"] == ["# all\nquery_orders(query='@')"]


def test_unknown_user_is_an_error(db, tmp_path):
    """--user must name an existing user."""
    # when
    _, _, error = run("export", "--user", "nobody", "--dir", str(tmp_path))
    # then
    assert error == "No user named 'nobody'."
    assert list(tmp_path.iterdir()) == []
