"""toolhub's documentation in the admin: /admin/docs/<name>.md renders docs/<name>.md, so that a help text
that cites a page links to it (doc_link) instead of naming a file the reader may not have at hand.

Only the files of the docs/ folder beside manage.py, by a plain name (letters, digits, dashes): anything else
is a 404. The pages are toolhub's own; they are rendered with raw HTML off all the same.
"""

import re
from functools import cache
from pathlib import Path

from django.conf import settings
from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.functional import lazy
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

__all__ = ["DOCS_DIR", "doc_link", "doc_page", "doc_url", "help_text"]

DOCS_DIR = Path(settings.BASE_DIR) / "docs"
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
# A link between the pages (`auth.md`, `docs/auth.md#section`): rewritten to the admin's page.
DOC_HREF = re.compile(r'href="(?:\./|docs/)?([a-z0-9][a-z0-9-]{0,63})\.md(#[^"]*)?"')


def doc_url(name: str, anchor: str = "") -> str:
    """The admin URL of docs/<name>.md (`anchor` without its #)."""
    return reverse("toolhub-doc", args=[name]) + (f"#{anchor}" if anchor else "")


def doc_link(name: str, anchor: str = "") -> SafeString:
    """A link to docs/<name>.md in the admin, labelled with the file's path as the text used to cite it."""
    return format_html('<a href="{}">docs/{}.md</a>', doc_url(name, anchor), name)


def _help_text(text: str) -> SafeString:
    text = str(text)
    parts = re.split(r"docs/([a-z0-9][a-z0-9-]{0,63})\.md", text)
    html = format_html("{}", parts[0])
    for index in range(1, len(parts), 2):
        html += doc_link(parts[index]) + format_html("{}", parts[index + 1])
    return html


# A help text (or fieldset description) whose `docs/<name>.md` citations are links to the admin's pages, the rest
# escaped; lazy, as forms and fieldsets are declared before the URLs can be reversed.
help_text = lazy(_help_text, SafeString)


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def render(markdown: str) -> str:
    """The page as HTML: CommonMark with tables, raw HTML shown as text, links between pages to the admin's."""
    html = _parser().render(markdown)
    return DOC_HREF.sub(lambda m: f'href="{reverse("toolhub-doc", args=[m.group(1)])}{m.group(2) or ""}"', html)


def doc_page(request: HttpRequest, name: str) -> HttpResponse:
    """Reached through admin.site.admin_view (staff login)."""
    path = DOCS_DIR / f"{name}.md"
    if not NAME.fullmatch(name) or not path.is_file():
        raise Http404(f"No page docs/{name}.md.")
    text = path.read_text(encoding="utf-8")
    title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), f"{name}.md")
    context = {
        **admin.site.each_context(request),
        "title": title,
        "name": name,
        "body": mark_safe(render(text)),  # noqa: S308 - markdown-it with raw HTML off escapes the text
    }
    return TemplateResponse(request, "admin/toolhub_doc.html", context)
