"""STYLE's layering rule: tools_app never imports mcp_app (dependencies point one way).

mcp_app builds on tools_app; where tools_app needs something only mcp_app knows (the call log, the
bindings panel on the tool pages), mcp_app plugs it in (tools_app.calls recorders, register_tool_panel).
Tests may use mcp_app fixtures, so tools_app/tests is not checked.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are module, class or function docstrings."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _mentions_of_mcp_app(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docstrings = _docstrings(tree)
    where = path.relative_to(ROOT.parent)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{where}:{node.lineno} import {a.name}" for a in node.names if a.name.split(".")[0] == "mcp_app"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "mcp_app":
            found.append(f"{where}:{node.lineno} from {node.module}")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "mcp_app" in node.value
            and id(node) not in docstrings
        ):
            found.append(f"{where}:{node.lineno} {node.value!r}")
    return found


def test_tools_app_code_never_names_mcp_app():
    """No module of tools_app outside its tests imports mcp_app or names it in a string (get_model, URL names)."""
    # given
    modules = sorted(p for p in ROOT.rglob("*.py") if "tests" not in p.relative_to(ROOT).parts)
    # when
    offenders = [mention for module in modules for mention in _mentions_of_mcp_app(module)]
    # then
    assert {"admin.py", "calls.py", "filtersets.py", "api/views.py", "registry/scope.py"} <= {
        str(module.relative_to(ROOT)) for module in modules
    }
    assert offenders == []


def test_the_check_sees_imports_and_names_but_not_docstrings(tmp_path, monkeypatch):
    """The checker reports an import, a from-import and a model looked up by name; a docstring is fine."""
    # given
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path / "pkg")
    module = tmp_path / "pkg" / "m.py"
    module.parent.mkdir()
    module.write_text(
        '"""Talks about mcp_app."""\n'
        "import mcp_app.models\n"
        "from mcp_app.services import binding_create\n"
        "def f(apps):\n"
        '    """Also mcp_app."""\n'
        '    return apps.get_model("mcp_app", "CallLog")  # mcp_app in a comment\n'
    )
    # when
    found = _mentions_of_mcp_app(module)
    # then
    assert found == [
        "pkg/m.py:2 import mcp_app.models",
        "pkg/m.py:3 from mcp_app.services",
        "pkg/m.py:6 'mcp_app'",
    ]
