"""The official JMESPath compliance suite, run through toolhub's query entry point.

jmespath_compliance/ holds the jmespath project's compliance tests, unchanged (its README.md names the
commit, LICENSE is theirs). Every case of every file is one test, with the id `<file>-<group>-<case>`:

- a `result` case runs `run_query`, what tools and the API evaluate `query` with, and must return the
  expected JSON exactly: true is not 1, 1.0 is not 1, object keys come in the expected order;
- an `error` case must raise ToolError(INVALID_QUERY) caused by the jmespath error of that kind, at the
  stage jmespath raises it: syntax errors when the expression is compiled, the others when it runs;
- a benchmark case without an expected result must return what jmespath's interpreter returns.

Every case must also give exactly the interpreter's outcome (result, or exception class and message),
as the compiler's contract is jmespath 1.1.0's TreeInterpreter reproduced exactly. A case where
jmespath 1.1.0 itself disagrees with the suite goes in INTERPRETER_DEVIATIONS with its reason, and is
then held to the interpreter's result instead of the suite's.
"""

import copy
import json
from pathlib import Path
from typing import Any

import jmespath
import pytest
from jmespath import exceptions as jmespath_errors

from tools_app.data_access.jmespath_compiler import compile_query
from tools_app.data_access.query import compile_expression, run_query
from tools_app.kernel.errors import ErrorCode, ToolError
from tools_app.tests.data_access.test_jmespath_compiler import _canonical as _typed

COMPLIANCE_DIR = Path(__file__).parent / "jmespath_compliance"
REQUIREMENTS = Path(__file__).resolve().parents[3] / "requirements.txt"
# The jmespath release whose TreeInterpreter the compiler reproduces and whose private names it uses.
JMESPATH_VERSION = "1.1.0"
# Some cases use the legacy `literal` string syntax on purpose; jmespath warns about it.
pytestmark = pytest.mark.filterwarnings("ignore:deprecated string literal syntax:PendingDeprecationWarning")

# Case id -> why jmespath 1.1.0 does not give the suite's expected result. The compiler follows the
# interpreter on these. With the vendored suite and jmespath 1.1.0 there are none: the interpreter
# passes every case.
INTERPRETER_DEVIATIONS: dict[str, str] = {}

# Suite error kind -> the exact jmespath exception classes that stand for it (exact, because ArityError
# is a ParseError and every jmespath error is a ValueError), and whether it is raised on compiling.
ERROR_KINDS: dict[str, tuple[tuple[type[Exception], ...], bool]] = {
    "syntax": (
        (jmespath_errors.ParseError, jmespath_errors.LexerError, jmespath_errors.IncompleteExpressionError),
        True,
    ),
    "invalid-arity": ((jmespath_errors.ArityError, jmespath_errors.VariadictArityError), False),
    "invalid-type": ((jmespath_errors.JMESPathTypeError,), False),
    "unknown-function": ((jmespath_errors.UnknownFunctionError,), False),
    "invalid-value": ((ValueError,), False),  # a zero slice step
}


def _outcome(compile_, expression: str, data: Any) -> tuple:
    try:
        return ("ok", _typed(compile_(expression).search(copy.deepcopy(data))))
    except Exception as exc:  # whatever it is, the compiler must raise the same
        return ("error", type(exc).__name__, str(exc))


def _load_cases() -> list:
    cases = []
    for path in sorted(COMPLIANCE_DIR.glob("*.json")):
        for group_index, group in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            for case_index, case in enumerate(group["cases"]):
                case_id = f"{path.name}-{group_index}-{case_index}"
                cases.append(pytest.param(case_id, group["given"], case, id=case_id))
    return cases


CASES = _load_cases()


def test_the_whole_suite_is_collected():
    """All 16 files and their 908 cases are there, so the parametrised test cannot be silently short."""
    # given
    files = sorted(path.name for path in COMPLIANCE_DIR.glob("*.json"))
    # when
    count = len(CASES)
    # then
    assert len(files) == 16, files
    assert count == 908


@pytest.mark.parametrize(("case_id", "given", "case"), CASES)
def test_compliance_case(case_id, given, case):
    """The case's expected result or error through run_query, and exactly the interpreter's outcome."""
    # given
    expression = case["expression"]
    interpreted = _outcome(jmespath.compile, expression, given)
    # when
    compiled = _outcome(compile_query, expression, given)
    # then
    assert compiled == interpreted, "the compiler and jmespath's interpreter disagree"
    if "error" in case:
        _assert_invalid_query(expression, given, case["error"])
        return
    if "result" in case and case_id not in INTERPRETER_DEVIATIONS:
        expected = _typed(case["result"])
    else:  # a benchmark case without a result, or a listed deviation: jmespath 1.1.0 is the reference
        assert interpreted[0] == "ok", interpreted
        expected = interpreted[1]
    assert _typed(run_query(expression, copy.deepcopy(given))) == expected


def _assert_invalid_query(expression: str, given: Any, kind: str) -> None:
    causes, on_compile = ERROR_KINDS[kind]
    if on_compile:
        with pytest.raises(ToolError) as caught:
            compile_expression(expression)
    else:
        compile_expression(expression)  # compiles: this kind of error is raised when the expression runs
        with pytest.raises(ToolError) as caught:
            run_query(expression, copy.deepcopy(given))
    assert caught.value.code == ErrorCode.INVALID_QUERY
    assert type(caught.value.__cause__) in causes, repr(caught.value.__cause__)
    assert caught.value.details["query"] == expression


def test_listed_deviations_are_cases_jmespath_itself_fails():
    """Each listed case exists, has a reason, and jmespath 1.1.0 really gives another result than the suite."""
    # given
    cases = {param.id: param.values for param in CASES}
    checked = []
    # when
    for case_id, reason in INTERPRETER_DEVIATIONS.items():
        _, given, case = cases[case_id]
        interpreted = _outcome(jmespath.compile, case["expression"], given)
        checked.append(case_id)
        # then
        assert reason.strip(), case_id
        assert "result" in case, case_id
        assert interpreted != ("ok", _typed(case["result"])), f"{case_id} passes now: remove it from the list"
    assert checked == list(INTERPRETER_DEVIATIONS)


def test_installed_jmespath_is_the_version_the_compiler_reproduces():
    """The compiler copies jmespath 1.1.0's semantics and reaches into its private names: another version fails."""
    # given
    installed = jmespath.__version__
    # when
    matches = installed == JMESPATH_VERSION
    # then
    assert matches, (
        f"jmespath {installed} is installed, but tools_app/data_access/jmespath_compiler.py reproduces jmespath "
        f"{JMESPATH_VERSION}'s TreeInterpreter and uses its private names (visitor._equals, visitor._is_comparable, "
        "visitor._Expression, Functions.FUNCTION_TABLE, functions.REVERSE_TYPES_MAP; query.py uses "
        "visitor._Expression too). Before moving the pin in requirements.txt: vendor the compliance suite of the "
        "new release (tools_app/tests/data_access/jmespath_compliance/README.md), run this module and "
        "test_jmespath_compiler.py, review each private name against the new jmespath/visitor.py and "
        "jmespath/functions.py, then update JMESPATH_VERSION here."
    )


def test_requirements_pin_the_version_the_compiler_reproduces():
    """requirements.txt installs exactly the jmespath release the compiler was written against."""
    # given
    lines = REQUIREMENTS.read_text(encoding="utf-8").splitlines()
    # when
    pins = [line.split("#")[0].strip() for line in lines if line.lower().startswith("jmespath")]
    # then
    assert pins == [f"jmespath=={JMESPATH_VERSION}"]
