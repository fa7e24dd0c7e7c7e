"""tools_app.kernel.limits: every TOOLHUB_* limit and default is written there once, as the docs give it, and
read only through it."""

import ast
import re
from pathlib import Path

import pytest

from tools_app.kernel import limits
from tools_app.kernel.limits import GiB, KiB, MiB

ROOT = Path(__file__).resolve().parents[3]
LIMIT_DOCS = ("docs/input-limits.md", "docs/budgets.md")
PACKAGES = ("tools_app", "toolhub", "mcp_app", "oauth_app")
SETTING = re.compile(r"`(TOOLHUB_[A-Z0-9_]+)`")
PROSE_DEFAULT = re.compile(r"`(TOOLHUB_[A-Z0-9_]+)`\s+\(default ([^)]+)\)")


def documented_limits() -> list[tuple[str, str, str]]:
    """(doc, setting, default cell) for each setting named in the setting column of a limits table of the docs
    (what a parenthesis adds, such as "instead of `TOOLHUB_MAX_REQUEST_BYTES`", names no limit of the row), and
    for each whose default the prose gives."""
    found = []
    for doc in LIMIT_DOCS:
        header: list[str] | None = None
        for line in (ROOT / doc).read_text().splitlines():
            if not line.startswith("|"):
                header = None
                continue
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
                continue
            setting_column = next((i for i, name in enumerate(header) if name.startswith("setting")), None)
            if setting_column is None or "default" not in header or set(line) <= set("|-: "):
                continue
            named = re.sub(r"\([^)]*\)", "", cells[setting_column])
            for setting in SETTING.findall(named):
                found.append((doc, setting, cells[header.index("default")]))
        # and in the prose: "`TOOLHUB_IMPORTS_PER_OWNER` (default 1)"
        found.extend((doc, setting, default) for setting, default in PROSE_DEFAULT.findall((ROOT / doc).read_text()))
    return found


def shown(value: float, unit: str) -> list[str]:
    """How the docs write `value`: bytes in the largest binary unit that holds them whole, else the number with
    thousands separators (a unit such as MiB or ms follows it in the docs)."""
    if unit == "bytes":
        for size, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
            if value and value % size == 0:
                return [f"{value // size:,} {name}"]
    return [f"{value:,}" if float(value).is_integer() else f"{value:g}"]


def test_the_docs_limits_tables_are_read():
    """The reader below finds the tables it checks (a changed layout would make the next test pass vacuously)."""
    # when
    settings_named = {setting for _, setting, _ in documented_limits()}
    # then
    assert len(settings_named) == 28
    assert {"TOOLHUB_MAX_TABLE_BYTES", "TOOLHUB_MAX_ROWS_TABLE_BYTES", "TOOLHUB_IMPORTS_PER_WORKER"} <= settings_named
    assert "TOOLHUB_MAX_REQUEST_BYTES" in settings_named  # its own row, not only the import row's parenthesis


@pytest.mark.parametrize(("doc", "setting", "cell"), documented_limits(), ids=lambda value: str(value)[:40])
def test_every_documented_limit_is_defined_with_its_documented_default(doc, setting, cell):
    """docs/input-limits.md and docs/budgets.md give the default kernel/limits.py holds (a table stored as rows
    has one per database engine)."""
    # given
    limit = limits.LIMITS.get(setting)
    assert limit is not None, f"{setting} ({doc}) is not defined in tools_app/kernel/limits.py"
    defaults = limits.ROWS_TABLE_BYTES_BY_ENGINE.values() if limit is limits.MAX_ROWS_TABLE_BYTES else [limit.default]
    # then
    for default in defaults:
        for text in shown(default, limit.unit):
            assert re.search(rf"(?<![\d.,]){re.escape(text)}(?![\d.,])", cell), (doc, setting, text, cell)


def test_each_setting_is_defined_once_with_a_name_unit_and_meaning():
    """LIMITS holds every setting of the module by its name; each says what it bounds, in what unit."""
    # given
    defined = [value for name, value in vars(limits).items() if name.isupper() and isinstance(value, limits.Setting)]
    # then
    assert len(defined) == len(limits.LIMITS) == len({value.setting for value in defined})
    for value in defined:
        assert (value.setting[:8], bool(value.unit), bool(value.meaning)) == ("TOOLHUB_", True, True), value


def _direct_reads(path: Path) -> list[str]:
    """Where `path` reads a TOOLHUB_* setting itself: `settings.TOOLHUB_X`, or getattr/hasattr(settings,
    "TOOLHUB_X", ...)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        name = None
        if isinstance(node, ast.Attribute) and node.attr.startswith("TOOLHUB_"):
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and str(node.args[1].value).startswith("TOOLHUB_")
        ):
            name = str(node.args[1].value)
        if name is not None:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return found


def test_no_module_reads_a_setting_itself():
    """Outside kernel/limits.py no module of tools_app, toolhub, mcp_app or oauth_app reads a TOOLHUB_* setting
    (the tests, which set them, and toolhub/settings.py, which defines them, aside)."""
    # given
    sources = [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "tests" not in path.parts and path.name != "settings.py" and path != ROOT / "tools_app/kernel/limits.py"
    ]
    # when
    reads = [read for path in sources for read in _direct_reads(path)]
    # then
    assert reads == []


def test_the_settings_module_takes_every_default_from_limits():
    """toolhub/settings.py reads each variable of the environment with the default written in kernel/limits.py
    (or another variable's), never a number or text of its own."""
    # given
    tree = ast.parse((ROOT / "toolhub/settings.py").read_text())
    # when
    literal = [
        f"line {node.lineno}: {node.args[0].value}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and len(node.args) >= 2
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in limits.LIMITS
        and isinstance(node.args[1], ast.Constant | ast.BinOp | ast.UnaryOp)
        and getattr(node.args[1], "value", None) != ""  # an empty text: "unset", its default follows
    ]
    # then
    assert literal == []


def test_a_limit_is_read_when_checked_with_its_floor(settings):
    """A reader reads the setting now; a value under the floor reads as the floor; an unset one as the default."""
    # given
    settings.TOOLHUB_CALL_ARGUMENTS_BYTES = 10
    settings.TOOLHUB_MAX_TABLE_BYTES = 1234
    del settings.TOOLHUB_MAX_TABLE_DEPTH
    # then
    assert limits.CALL_ARGUMENTS_BYTES.get() == 256
    assert limits.max_table_bytes() == 1234
    assert limits.max_table_depth() == 64


def test_a_rows_table_limit_of_zero_is_the_engines_figure(settings):
    """TOOLHUB_MAX_ROWS_TABLE_BYTES = 0 (the default): 5 GiB on PostgreSQL, 2 GiB on SQLite; set, the setting."""
    # given
    settings.TOOLHUB_MAX_ROWS_TABLE_BYTES = 0
    # then
    assert (limits.max_rows_table_bytes("postgresql"), limits.max_rows_table_bytes("sqlite")) == (5 * GiB, 2 * GiB)
    settings.TOOLHUB_MAX_ROWS_TABLE_BYTES = 1000
    assert limits.max_rows_table_bytes("postgresql") == 1000


def test_a_limit_is_read_again_after_its_setting_changes(settings):
    """A limit keeps what it read until a setting changes (Django's setting_changed): each change is seen at the
    next check, with its floor applied."""
    # given
    assert limits.CALL_RESULT_BYTES.get() == 4 * KiB
    # when
    settings.TOOLHUB_CALL_RESULT_BYTES = 1000
    # then
    assert limits.CALL_RESULT_BYTES.get() == 1000
    # when
    settings.TOOLHUB_CALL_RESULT_BYTES = 10
    # then
    assert limits.CALL_RESULT_BYTES.get() == 256
    assert limits.CALL_RESULT_BYTES.raw() == 10
