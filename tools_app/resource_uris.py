"""Owner-chosen resource URIs of bindings (Binding.resource_uri): their syntax and how a template
matches a URI. Pure functions: no database, no MCP.

A binding's `resource_uri` is either
- a fixed URI (no `{`): on a reader binding (get_all_data, query_data), the URI its mount is served at; or
- a record template, an RFC 6570 level-1 template with exactly one expression `{name}` (any variable name):
  on a `select` binding, one record of its mount, the variable standing for the record's key.

Rules, all checked when a binding is saved (Binding.clean, the services under the instance's lock):
- a scheme (`^[a-z][a-z0-9+.-]*:`), written literally (no expression inside it), at most
  MAX_RESOURCE_URI_CHARS characters, no whitespace and no control characters (validate_resource_uri, the field's
  validator);
- not the `toolhub:` scheme: it is reserved for the default URIs (`toolhub://tables/<id>[/<path>]` and their
  `{?key}` templates), so a custom URI can never equal or match a default one;
- unique among the instance's custom URIs and templates; two templates that differ only in the variable's
  name are the same template;
- a template may not match a fixed custom URI of the same instance (nor a fixed URI one that a template
  matches): a URI is either fixed or a record, never both.
Two different templates may still both match some URI (`a://x/{id}` and `a://x/{id}.json` both match
`a://x/1.json`): the one with more literal characters wins, then the one that sorts first (`ordered`).

Matching: an expression expands to unreserved characters and percent-encoded octets only (RFC 6570 §3.2.2),
so `{id}` matches one or more of `A-Z a-z 0-9 - . _ ~` and `%XX`, never `/`, `?` or `#`; the matched value is
percent-decoded (UTF-8) into the record key.
"""

import functools
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import quote, unquote

from django.core.exceptions import ValidationError

from tools_app.kernel.limits import MAX_RESOURCE_URI_CHARS

__all__ = [
    "MAX_RESOURCE_URI_CHARS",
    "RESERVED_SCHEME",
    "Template",
    "conflict",
    "ordered",
    "parse_template",
    "resource_uri_problem",
    "validate_resource_uri",
]

RESERVED_SCHEME = "toolhub"
SCHEME_RE = re.compile(r"^[a-z][a-z0-9+.-]*:")
# RFC 6570 level 1: `{` varname `}`, varname = varchar *( ["."] varchar ), varchar = ALPHA / DIGIT / "_" / pct-encoded.
EXPRESSION_RE = re.compile(r"\{([A-Za-z0-9_]|%[0-9A-Fa-f]{2})((?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*)\}")
VALUE = r"(?:[A-Za-z0-9._~-]|%[0-9A-Fa-f]{2})+"


def _bad_character(value: str) -> str | None:
    for char in value:
        if char.isspace() or unicodedata.category(char) == "Cc":
            return char
    return None


def validate_resource_uri(value: str) -> None:
    """The field's own rules: a literal scheme, at most MAX_RESOURCE_URI_CHARS characters, no whitespace or control
    characters. (What depends on the binding's tool and instance is Binding.clean's.)"""
    if not value:
        return
    if len(value) > MAX_RESOURCE_URI_CHARS:
        raise ValidationError(f"A resource URI is at most {MAX_RESOURCE_URI_CHARS} characters.", code="max_length")
    char = _bad_character(value)
    if char is not None:
        raise ValidationError(
            f"A resource URI has no whitespace or control characters (found U+{ord(char):04X}); percent-encode them.",
            code="invalid",
        )
    if SCHEME_RE.match(value) is None:
        raise ValidationError(
            "A resource URI starts with a scheme: a lower-case letter, then letters, digits, '+', '.' or '-', "
            "then ':' (e.g. 'orders://all' or 'https://example.com/orders').",
            code="invalid",
        )


@dataclass(frozen=True, slots=True)
class Template:
    """A record template `prefix{variable}suffix`."""

    uri: str
    prefix: str
    variable: str
    suffix: str

    @property
    def shape(self) -> tuple[str, str]:
        """What makes two templates the same template (the variable's name does not)."""
        return self.prefix, self.suffix

    def match(self, uri: str) -> str | None:
        """The decoded value of the variable when `uri` is an expansion of this template, else None (also
        when its percent-encoding is not UTF-8)."""
        if not (uri.startswith(self.prefix) and uri.endswith(self.suffix)):
            return None
        found = _regex(self.prefix, self.suffix).fullmatch(uri)
        if found is None:
            return None
        try:
            return unquote(found.group(1), errors="strict")
        except UnicodeDecodeError:
            return None

    def expand(self, value: str) -> str:
        """The URI of the record whose key is `value` (RFC 6570 simple expansion)."""
        return self.prefix + quote(value, safe="") + self.suffix


@functools.lru_cache(maxsize=256)
def _regex(prefix: str, suffix: str) -> re.Pattern[str]:
    return re.compile(re.escape(prefix) + f"({VALUE})" + re.escape(suffix))


def parse_template(uri: str) -> Template | None:
    """`uri` as a record template when it has exactly one well-formed expression and no other brace; None
    for a URI with no brace at all. Raises ValueError, with the reason, for anything else."""
    if "{" not in uri and "}" not in uri:
        return None
    expressions = list(EXPRESSION_RE.finditer(uri))
    if len(expressions) != 1:
        raise ValueError(
            "a record template has exactly one expression {name} (RFC 6570 level 1: letters, digits and '_')"
        )
    found = expressions[0]
    prefix, suffix = uri[: found.start()], uri[found.end() :]
    if any(brace in prefix + suffix for brace in "{}"):
        raise ValueError("a record template has no brace outside its one expression {name}")
    if SCHEME_RE.match(prefix) is None:
        raise ValueError("the scheme of a record template is written out, not an expression")
    return Template(uri=uri, prefix=prefix, variable=found.group(0)[1:-1], suffix=suffix)


def resource_uri_problem(uri: str, *, record: bool) -> str | None:
    """Why `uri` cannot be the resource_uri of a reader binding (`record` False: a fixed URI) or of a
    `select` binding (`record` True: a record template), or None."""
    if uri.split(":", 1)[0] == RESERVED_SCHEME:
        return (
            f"The {RESERVED_SCHEME}: scheme is reserved for the default resource URIs "
            f"({RESERVED_SCHEME}://tables/<id>...); choose another scheme."
        )
    try:
        template = parse_template(uri)
    except ValueError as exc:
        return f"Invalid record template: {exc}."
    if record and template is None:
        return (
            "A select binding's resource URI is a record template with one variable standing for the key, "
            "e.g. 'orders://order/{id}'."
        )
    if not record and template is not None:
        return (
            "A reader binding's resource URI is a fixed URI (no {variable}): it is where the whole mount is "
            "read. Record templates go on a select binding."
        )
    return None


def conflict(uri: str, other: str) -> str | None:
    """Why `uri` cannot sit beside `other` on one instance, as a sentence where `{where}` stands for whose
    URI `other` is; None when they can. (Malformed URIs are resource_uri_problem's: never a conflict.)"""
    if uri == other:
        return f"{uri!r} is already the resource URI {{where}}."
    try:
        template, other_template = parse_template(uri), parse_template(other)
    except ValueError:
        return None
    if template is not None and other_template is not None and template.shape == other_template.shape:
        return f"{uri!r} is the same template as {other!r}, the resource URI {{where}}."
    if template is not None and other_template is None and template.match(other) is not None:
        return (
            f"{uri!r} would also match {other!r}, the resource URI {{where}}: a URI is either fixed or a record. "
            "Change one of them."
        )
    if template is None and other_template is not None and other_template.match(uri) is not None:
        return (
            f"{uri!r} matches {other!r}, the record template {{where}}: a URI is either fixed or a record. "
            "Change one of them."
        )
    return None


def ordered(templates: list[Template]) -> list[Template]:
    """The order in which templates are tried against a URI: more literal characters first, then by URI."""
    return sorted(templates, key=lambda t: (-(len(t.prefix) + len(t.suffix)), t.uri))
