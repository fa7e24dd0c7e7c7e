"""Markdown to HTML that is safe to show an admin: THE one place text from tools becomes HTML.

Descriptions, examples and everything else in the usage guide come from tool owners and from agents
(`register_tool`), so they are untrusted. Two steps:

1. markdown-it (CommonMark) with raw HTML off: `<script>` or `<img onerror=...>` in the text stays text.
   An image (`![alt](url)`) is rendered as a link to its URL, never as `<img>`: a description must not
   make the viewer's browser fetch anything.
2. nh3 (the ammonia sanitizer) on the result: only the tags CommonMark makes (no `img`), no attributes
   but `href`/`title` on links and `start` on lists, links only to http, https, mailto or a relative
   URL, every link `rel="noopener noreferrer nofollow"`.
"""

from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

__all__ = ["LINK_REL", "markdown_to_safe_html"]

LINK_REL = "noopener noreferrer nofollow"

_TAGS = {
    "a",
    "blockquote",
    "br",
    "code",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "ul",
}

_CLEANER = nh3.Cleaner(
    tags=_TAGS,
    clean_content_tags={"script", "style"},
    attributes={"a": {"href", "title"}, "ol": {"start"}},
    url_schemes={"http", "https", "mailto"},
    link_rel=LINK_REL,
    strip_comments=True,
)


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """An image becomes a link to its URL, labelled with its alt text (or the URL when there is none);
    inside a link (HTML has no link in a link), just that label."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    label = escapeHtml(self.renderInlineAsText(token.children or [], options, env) or src)
    inside_link = sum({"link_open": 1, "link_close": -1}.get(before.type, 0) for before in tokens[:idx]) > 0
    return label if inside_link else f'<a href="{escapeHtml(src)}">{label}</a>'


def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False})
    parser.add_render_rule("image", _image_as_link)
    return parser


_MARKDOWN = _parser()


def markdown_to_safe_html(markdown: str) -> str:
    """CommonMark `markdown` as sanitized HTML (see the module docstring); safe to mark safe in a template."""
    return _CLEANER.clean(_MARKDOWN.render(markdown))
