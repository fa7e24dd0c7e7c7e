"""Markdown from tools rendered as HTML for the admin: sanitized, no images, safe links."""

import re

import pytest
from django.urls import reverse

from tools_app.registry.rendering import markdown_to_safe_html

REL = 'rel="noopener noreferrer nofollow"'


@pytest.mark.parametrize(
    ("markdown", "html"),
    [
        # Images never load: a link to the URL, labelled with the alt text (or the URL).
        ("![x](http://attacker/p.png)", f'<p><a href="http://attacker/p.png" {REL}>x</a></p>\n'),
        ("![](http://attacker/p.png)", f'<p><a href="http://attacker/p.png" {REL}>http://attacker/p.png</a></p>\n'),
        ('![a "b" <c>](http://attacker/p.png)', f'<p><a href="http://attacker/p.png" {REL}>a "b" &lt;c&gt;</a></p>\n'),
        (
            "[![logo](http://attacker/i.png)](https://example.com/)",
            f'<p><a href="https://example.com/" {REL}>logo</a></p>\n',
        ),
        ("![x](javascript:alert(1))", "<p>![x](javascript:alert(1))</p>\n"),
        # Raw HTML stays text.
        ("<img src=x onerror=alert(1)>", "<p>&lt;img src=x onerror=alert(1)&gt;</p>\n"),
        ("<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>\n"),
        ('<a href="javascript:alert(1)">x</a>', '<p>&lt;a href="javascript:alert(1)"&gt;x&lt;/a&gt;</p>\n'),
        ("<iframe src=https://attacker/></iframe>", "<p>&lt;iframe src=https://attacker/&gt;&lt;/iframe&gt;</p>\n"),
        ("<style>body{display:none}</style>", "<p>&lt;style&gt;body{display:none}&lt;/style&gt;</p>\n"),
        # No script URLs, in any case; links get rel.
        ("[a](javascript:alert(1))", "<p>[a](javascript:alert(1))</p>\n"),
        ("[a](JaVaScRiPt:alert(1))", "<p>[a](JaVaScRiPt:alert(1))</p>\n"),
        ("[a](data:text/html;base64,PHNjcmlwdD4=)", "<p>[a](data:text/html;base64,PHNjcmlwdD4=)</p>\n"),
        ("[a](vbscript:msgbox)", "<p>[a](vbscript:msgbox)</p>\n"),
        ("<javascript:alert(1)>", "<p>&lt;javascript:alert(1)&gt;</p>\n"),
        ("[a](ftp://example.com/f)", f"<p><a {REL}>a</a></p>\n"),
        (
            '[docs](https://example.com/d "Docs")',
            f'<p><a href="https://example.com/d" title="Docs" {REL}>docs</a></p>\n',
        ),
        ("<https://example.com/x>", f'<p><a href="https://example.com/x" {REL}>https://example.com/x</a></p>\n'),
        ("[mail](mailto:a@example.com)", f'<p><a href="mailto:a@example.com" {REL}>mail</a></p>\n'),
        ("[admin](/admin/)", f'<p><a href="/admin/" {REL}>admin</a></p>\n'),
        # What the guide itself uses still renders.
        ('# T\n\n```json\n{"a": "<b>"}\n```', '<h1>T</h1>\n<pre><code>{"a": "&lt;b&gt;"}\n</code></pre>\n'),
        (
            "3. *a*\n4. **b** `c`",
            '<ol start="3">\n<li><em>a</em></li>\n<li><strong>b</strong> <code>c</code></li>\n</ol>\n',
        ),
    ],
)
def test_markdown_is_rendered_safe(markdown, html):
    """Exact HTML for each attacker payload and for the Markdown the guide is made of."""
    assert markdown_to_safe_html(markdown) == html


def test_instance_page_guide_shows_hostile_description_harmlessly(client, owner, table, make_tool, instance, bind):
    """A description with an image, a script and a javascript: link reaches the admin's guide as text and
    a plain link: no image of its own, no <script>, no javascript: URL anywhere in the page."""
    # given
    description = (
        "Orders. ![pixel](http://attacker.invalid/p.png) <script>alert(1)</script> "
        "[click](javascript:alert(1)) [home](https://example.com/)"
    )
    bind(instance, make_tool(owner, table, name="orders_query", description=description))
    client.force_login(owner)
    # when
    response = client.get(reverse("admin:tools_app_mcpinstance_guide", args=[instance.pk]))
    # then
    html = response.context["usage_guide"]["html"]
    assert (
        f'<p><strong>Purpose</strong>: Orders. <a href="http://attacker.invalid/p.png" {REL}>pixel</a> '
        "&lt;script&gt;alert(1)&lt;/script&gt; "
        f'[click](javascript:alert(1)) <a href="https://example.com/" {REL}>home</a></p>'
    ) in html
    page = response.content.decode()
    # The only images are the admin's own icons (a tabular inline's help texts): none from the description.
    sources = re.findall(r"<img\b[^>]*?\bsrc=\"([^\"]*)\"", page)
    assert page.count("<img") == len(sources)
    assert [src for src in sources if not src.startswith("/static/admin/img/")] == []
    assert 'attacker.invalid/p.png" rel' in page
    assert 'href="javascript:' not in page
    assert "<script>alert(1)" not in page
