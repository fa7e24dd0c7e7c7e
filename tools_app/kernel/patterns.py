"""Regex patterns chosen by users: Python `re` syntax and results, matched by RE2 in linear time.

Used by the registry's regex search (SPEC §5) and by JSON Schema `pattern` / `patternProperties`
(tools_app.safe_schema), whose patterns and matched strings both come from users.

Python's re backtracks: `(a|aa)+$`, `((a+))+$` or `(\\w+\\s?)+$` over a long description take exponential
time inside one C call that nothing can interrupt, and no syntactic blacklist catches every such pattern.
So a pattern is parsed by Python's re (the syntax callers know, and its error messages) and matched by RE2
(the `google-re2` package), whose matching time is linear in the text whatever the pattern. RE2 reads a
slightly different dialect; `to_re2` rewrites what would change a result:

- `\\d \\w \\s` and their negations become Unicode classes, as in Python (RE2's are ASCII-only);
- `$` also matches before a final newline (descriptions imported from YAML end with one), unless the
  `m` flag is on where it stands (globally, or in a scoped `(?m:...)` group); it does so by matching that
  newline, which only a pattern that goes on matching after `$` could notice; `\\Z` becomes `\\z`;
- `\\uXXXX`, `\\UXXXXXXXX`, `\\N{name}`, octal and escaped non-letters become `\\x{...}`; `[\\b]` is a backspace;
- `{,n}` means `{0,n}`; `(?#...)` comments are dropped.

What needs backtracking (backreferences, look-around, atomic groups, possessive quantifiers,
conditionals), the flags other than i, m, s (and u, the default), and `\\W` / `\\S` inside brackets (a Unicode class
difference RE2 cannot express) are refused with PatternError naming the construct. One difference is
kept: `\\b` and `\\B` see ASCII word characters only (RE2 has no Unicode word boundary).
"""

import re
import unicodedata

import re2

__all__ = ["PatternError", "compile_pattern", "to_re2"]

# Python's classes for str patterns. (?-i:...) keeps case folding from inflating the Unicode classes.
_CLASS_BODIES = {
    "d": r"\p{Nd}",
    "w": r"\p{L}\p{N}_",
    "s": r"\t\n\v\f\r\x1c-\x1f\x85\p{Z}",
}
_NEGATED_IN_BRACKETS = {"D": r"\P{Nd}"}  # \W and \S have no single negated property
_KEPT_ESCAPES = frozenset("AbBafnrtv")
_REPEAT = re.compile(r"\{(\d*)(,?)(\d*)\}")
_GROUP_FLAGS = re.compile(r"\(\?([aiLmsux]*)(?:-([imsx]*))?([:)])")
_MULTILINE_GLOBAL = re.compile(r"\(\?[aiLmsux]*m[aiLmsux]*\)")
_REFUSED_GROUPS = (
    ("(?P=", "a backreference (?P=name)"),
    ("(?=", "a look-around (?=...)"),
    ("(?!", "a look-around (?!...)"),
    ("(?<=", "a look-around (?<=...)"),
    ("(?<!", "a look-around (?<!...)"),
    ("(?>", "an atomic group (?>...)"),
    ("(?(", "a conditional group (?(...)...)"),
)
_BACKTRACKING = "look-around, backreferences, atomic groups, possessive quantifiers and conditionals"


class PatternError(ValueError):
    """A valid Python pattern the linear-time engine cannot run: `what` names the construct."""

    def __init__(self, what: str, *, needs_backtracking: bool = True):
        super().__init__(what)
        self.what = what
        self.needs_backtracking = needs_backtracking

    def message_for(self, pattern: str) -> str:
        """The INVALID_QUERY message: what was refused in `pattern`, why, and what to do."""
        if not self.needs_backtracking:
            return f"The pattern {pattern!r} is refused: {self.what}."
        return (
            f"The pattern {pattern!r} uses {self.what}. The regex search runs in time linear in the text, so it "
            f"does not support {_BACKTRACKING}; rewrite the pattern without it."
        )


def _hex(char: str) -> str:
    return f"\\x{{{ord(char):x}}}"


def _escape(pattern: str, i: int, in_brackets: bool) -> tuple[str, int]:
    """The RE2 form of the escape at pattern[i] (a backslash) and the index after it."""
    char = pattern[i + 1]
    if char in _CLASS_BODIES:
        body = _CLASS_BODIES[char]
        return (f"(?-i:{body})" if char == "d" else f"(?-i:[{body}])") if not in_brackets else body, i + 2
    if char.lower() in _CLASS_BODIES:
        if not in_brackets:
            return f"(?-i:[^{_CLASS_BODIES[char.lower()]}])", i + 2
        if char in _NEGATED_IN_BRACKETS:
            return _NEGATED_IN_BRACKETS[char], i + 2
        raise PatternError(
            "it uses \\W or \\S inside [...], which the regex search cannot express with Unicode classes; "
            "put it outside the brackets or list the characters wanted",
            needs_backtracking=False,
        )
    if char == "Z":
        return r"\z", i + 2
    if char == "b" and in_brackets:
        return _hex("\b"), i + 2
    if char in _KEPT_ESCAPES:
        return "\\" + char, i + 2
    if char in "xuU":
        width = {"x": 2, "u": 4, "U": 8}[char]
        return _hex(chr(int(pattern[i + 2 : i + 2 + width], 16))), i + 2 + width
    if char == "N":
        end = pattern.index("}", i)
        return _hex(unicodedata.lookup(pattern[i + 3 : end])), end + 1
    if char.isdigit():
        octal = re.match(r"[0-7]{1,3}", pattern[i + 1 : i + 4])
        is_octal = in_brackets or char == "0" or (octal is not None and len(octal.group()) == 3)
        if not is_octal or octal is None:  # None only for \8 or \9 in [...], which re.compile refuses
            raise PatternError(f"a backreference \\{char}")
        return _hex(chr(int(octal.group(), 8))), i + 1 + len(octal.group())
    # An escaped symbol is that character; Python refuses unknown letter escapes before this runs.
    return ("\\" + char if char.isascii() and char.isalpha() else _hex(char)), i + 2


def _group(pattern: str, i: int) -> tuple[str, int]:
    """The RE2 form of the `(?` group opening at pattern[i], and the index after what was consumed."""
    for prefix, what in _REFUSED_GROUPS:
        if pattern.startswith(prefix, i):
            raise PatternError(what)
    if pattern.startswith("(?#", i):
        return "", pattern.index(")", i) + 1
    if pattern.startswith("(?P<", i) or pattern.startswith("(?:", i):
        return pattern[i : i + 3], i + 3
    flags = _GROUP_FLAGS.match(pattern, i)
    if flags is not None:
        on, off, end = flags.group(1).replace("u", ""), flags.group(2) or "", flags.group(3)  # u: str default
        unsupported = sorted(set(on + off) - set("ims"))
        if unsupported:
            raise PatternError(
                f"the inline flag {''.join(unsupported)!r}, which the regex search does not support "
                "(it supports i, m and s)",
                needs_backtracking=False,
            )
        if not on and not off:
            return ("(?:" if end == ":" else ""), flags.end()
        return f"(?{on}{'-' + off if off else ''}{end}", flags.end()
    return pattern[i : i + 2], i + 2


def to_re2(pattern: str) -> str:
    """The RE2 pattern matching what Python's re matches with `pattern` (which Python's re accepts).

    Raises PatternError for what RE2 cannot run (see the module docstring).
    """
    # Whether `$` is multiline, per open group: the global flags (Python allows them only at the start) set
    # the outer mode, and a scoped group (?m:...) or (?-m:...) sets it until its `)`.
    modes = [_MULTILINE_GLOBAL.search(pattern) is not None]
    out: list[str] = []
    i, end = 0, len(pattern)
    in_brackets = first_in_brackets = False
    while i < end:
        char = pattern[i]
        if char == "\\":
            text, i = _escape(pattern, i, in_brackets)
            out.append(text)
            first_in_brackets = False
            continue
        if in_brackets:
            if char == "]" and not first_in_brackets:
                in_brackets = False
            first_in_brackets = False
            out.append(r"\[" if char == "[" else char)  # RE2 reads [:alpha:] as a class, Python as characters
            i += 1
            continue
        if char == "[":
            start = i
            i += 2 if pattern.startswith("^", i + 1) else 1
            out.append(pattern[start:i])
            in_brackets = first_in_brackets = True
            continue
        if char == "(" and pattern.startswith("(?", i):
            flags = _GROUP_FLAGS.match(pattern, i)
            text, i = _group(pattern, i)
            out.append(text)
            if flags is None:
                if not text.startswith("(?#") and text:  # a comment is dropped whole: no group
                    modes.append(modes[-1])
            elif flags.group(3) == ":":
                on, off = flags.group(1), flags.group(2) or ""
                modes.append(True if "m" in on else False if "m" in off else modes[-1])
            continue
        if char in "()":
            if char == "(":
                modes.append(modes[-1])
            elif len(modes) > 1:
                modes.pop()
            out.append(char)
            i += 1
            continue
        if char == "{":
            repeat = _REPEAT.match(pattern, i)
            if repeat is None or repeat.group() == "{}":
                out.append(r"\{")
                i += 1
                continue
            low, comma, high = repeat.groups()
            out.append(f"{{{low or 0}{comma}{high}}}")
            i, quantifier = repeat.end(), repeat.group()
        elif char == "$" and not modes[-1]:
            out.append(r"(?:\n?\z)")
            i += 1
            continue
        else:
            out.append("\\" + char if char in "]}" else char)
            i += 1
            quantifier = char if char in "*+?" else ""
        if quantifier and pattern.startswith("+", i):
            raise PatternError(f"a possessive quantifier {quantifier}+")
    return "".join(out)


def _options(*, ignore_case: bool) -> re2.Options:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.never_capture = True  # a yes/no match needs no groups, and lets RE2 use its DFA
    options.log_errors = False
    return options


_OPTIONS = {True: _options(ignore_case=True), False: _options(ignore_case=False)}


def compile_pattern(pattern: str, *, ignore_case: bool = True):
    """An RE2 pattern with Python's re semantics (search, fullmatch), case-insensitive unless told.

    Raises re.error when Python's re rejects the pattern, PatternError for what RE2 cannot run or
    for a pattern too large to compile (counted repetitions multiply: `(a{100}){100}` is 10,000 copies).
    """
    re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    translated = to_re2(pattern)
    try:
        # Not re2.compile(): it keeps the last 128 patterns (up to 8 MiB of automaton each) for the life of the
        # process, and these patterns are chosen by callers. This one is freed after the search.
        return re2._Regexp(translated, _OPTIONS[ignore_case])
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        if "too large" in reason or "repetition" in reason:
            what = f"it is too large for the search engine ({reason}); use smaller repetition counts"
        else:
            what = f"the search engine cannot run it ({reason})"
        raise PatternError(what, needs_backtracking=False) from exc
