"""The tests mirror the code (docs/architecture.md, "Where the tests go"): every test file sits where the one
rule puts it, every test directory is a package, no file is named for an issue, no code refers to an issue by
its number, and no fixture name is defined in two files. Each check is also run on a small made-up tree, so that
it is seen to refuse."""

import ast
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("tools_app", "mcp_app", "oauth_app", "toolhub")
SKIPPED_DIRECTORIES = {"node_modules", "artifacts", "__pycache__"}
ISSUE_NAME = re.compile(r"issue", re.IGNORECASE)
# The word issue (or issues) and a number, with or without "#": a comment or docstring states the contract and its
# reason; the number of the issue that asked for it says neither, to a reader without the tracker.
ISSUE_REFERENCE = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)


def python_files(root: Path) -> list[Path]:
    """Every .py file under root, relative to root, outside hidden directories (.venv, .git), node_modules and
    artifacts (pruned, not walked)."""
    found = []
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = sorted(
            name for name in subdirectories if not name.startswith(".") and name not in SKIPPED_DIRECTORIES
        )
        found.extend(Path(directory, name).relative_to(root) for name in files if name.endswith(".py"))
    return sorted(found)


def find_test_files(root: Path) -> list[Path]:
    """Every test_*.py file under root (see python_files), relative to root."""
    return [relative for relative in python_files(root) if relative.name.startswith("test_")]


def misplaced(root: Path, relative: Path) -> str | None:
    """Why the test file `relative` is not where the rule puts it, or None when it is."""
    parts = relative.parts
    if parts[0] in APPS and len(parts) >= 3 and parts[1] == "tests":
        mirrored = parts[2:-1]
        if not mirrored:
            return None
        if "migrations" in mirrored or "tests" in mirrored:
            return f"{relative}: tests of {parts[0]}/{'/'.join(mirrored)}/ are not a package of the product"
        if (root / parts[0] / Path(*mirrored) / "__init__.py").is_file():
            return None
        return f"{relative}: {parts[0]}/{'/'.join(mirrored)}/ is no package of {parts[0]}; mirror the package tested"
    if parts[0] == "tests" and len(parts) == 3 and parts[1] == "browser":
        return None
    if parts[0] == "tests" and len(parts) == 2:
        text = (root / relative).read_text()
        if "pytest.mark.e2e" in text or "pytest.mark.browser" in text:
            return None
        return f"{relative}: the root tests/ holds end-to-end tests only; this one belongs under <app>/tests/"
    return f"{relative}: outside every tests/ directory"


def issue_references(root: Path) -> list[str]:
    """`path:line` of every reference to an issue by its number, over every .py file under root (python_files):
    the product's modules, migrations, tests, scripts and benchmarks, their comments, docstrings and strings."""
    found = []
    for relative in python_files(root):
        for number, line in enumerate((root / relative).read_text().splitlines(), start=1):
            if ISSUE_REFERENCE.search(line):
                found.append(f"{relative}:{number}")
    return found


def missing_packages(root: Path, files: list[Path]) -> list[str]:
    """Test directories without an __init__.py (module names would clash between directories)."""
    missing = set()
    for relative in files:
        for depth in range(1, len(relative.parts)):
            directory = Path(*relative.parts[:depth])
            if "tests" in directory.parts and not (root / directory / "__init__.py").is_file():
                missing.add(str(directory))
    return sorted(missing)


def fixture_definitions(root: Path) -> dict[str, list[str]]:
    """Fixture name -> the files defining it, over every test file, conftest and test helper module."""
    definitions: dict[str, list[str]] = {}
    for relative in python_files(root):
        if "tests" not in relative.parts and relative.name != "conftest.py":
            continue
        text = (root / relative).read_text()
        if "fixture" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                ast.unparse(decorator.func if isinstance(decorator, ast.Call) else decorator)
                in ("pytest.fixture", "fixture")
                for decorator in node.decorator_list
            ):
                definitions.setdefault(node.name, []).append(str(relative))
    return definitions


def defined_twice(root: Path) -> dict[str, list[str]]:
    return {name: files for name, files in fixture_definitions(root).items() if len(files) > 1}


def test_every_test_file_sits_where_the_rule_puts_it():
    # given
    files = find_test_files(ROOT)
    # when
    wrong = [reason for relative in files if (reason := misplaced(ROOT, relative))]
    # then
    assert len(files) > 100
    assert wrong == []


def test_every_test_directory_is_a_package():
    assert missing_packages(ROOT, find_test_files(ROOT)) == []


def test_no_test_file_is_named_for_an_issue():
    assert [str(relative) for relative in find_test_files(ROOT) if ISSUE_NAME.search(relative.name)] == []


def test_no_code_refers_to_an_issue_by_its_number():
    assert issue_references(ROOT) == []


def test_no_fixture_name_is_defined_in_two_files():
    # given
    definitions = fixture_definitions(ROOT)
    # then
    assert len(definitions) > 100
    assert defined_twice(ROOT) == {}


def write(root: Path, relative: str, text: str = "") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_checks_refuse_a_tree_that_breaks_the_rule(tmp_path):
    # given
    for package in ("tools_app", "tools_app/registry", "tools_app/tests", "tools_app/tests/registry", "tests"):
        write(tmp_path, f"{package}/__init__.py")
    fixture = "import pytest\n\n\n@pytest.fixture\ndef shop():\n    return 1\n"
    write(tmp_path, "tools_app/tests/registry/test_search.py", fixture)
    write(tmp_path, "tools_app/tests/test_validators.py", fixture)
    write(tmp_path, "tools_app/tests/engine/test_speed.py")
    write(tmp_path, "tools_app/tests/migrations/test_old.py")
    write(tmp_path, "tests/test_api_tables.py", "def test_list(): ...\n")
    write(tmp_path, "tests/test_live.py", "import pytest\n\npytestmark = pytest.mark.e2e\n")
    write(tmp_path, "bench/test_bench.py")
    write(tmp_path, "mcp_app/tests/test_registry_issue17.py")
    number = "#" + "17"  # written apart, so that this file does not refer to an issue itself
    write(tmp_path, "tools_app/registry/search.py", f"def rank():\n    # the order Issues {number} and 18 asked for\n")
    write(tmp_path, "tools_app/migrations/0002_ranks.py", f'"""Ranks (issue {number[1:]})."""\n')
    write(tmp_path, "bench/ranking.py", '"""The issue a ranking raises: 17 of 20 found."""\n')
    # when
    files = find_test_files(tmp_path)
    wrong = {str(relative): misplaced(tmp_path, relative) for relative in files}
    # then
    assert {name for name, reason in wrong.items() if reason} == {
        "tools_app/tests/engine/test_speed.py",
        "tools_app/tests/migrations/test_old.py",
        "tests/test_api_tables.py",
        "bench/test_bench.py",
    }
    assert "tools_app/engine/ is no package of tools_app" in wrong["tools_app/tests/engine/test_speed.py"]
    assert missing_packages(tmp_path, files) == [
        "mcp_app/tests",
        "tools_app/tests/engine",
        "tools_app/tests/migrations",
    ]
    assert [str(relative) for relative in files if ISSUE_NAME.search(relative.name)] == [
        "mcp_app/tests/test_registry_issue17.py"
    ]
    assert issue_references(tmp_path) == ["tools_app/migrations/0002_ranks.py:1", "tools_app/registry/search.py:2"]
    assert defined_twice(tmp_path) == {
        "shop": ["tools_app/tests/registry/test_search.py", "tools_app/tests/test_validators.py"]
    }
