"""Markdown that agents write (daily reports), as HTML safe to put in a page.

``markdown-it-py`` (CommonMark, plus tables and strikethrough) renders it with raw HTML
off, so a tag in the text comes out escaped; ``nh3`` (the Ammonia sanitiser) then keeps
only the tags and attributes a report uses, links to http(s) and mailto only, with
``rel="noopener noreferrer nofollow"``. The text is the agent's: it may carry whatever
a prompt or a tool result put into it, so both steps stay.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

TAGS = {
    *("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "code"),
    *("ul", "ol", "li", "strong", "em", "s", "del", "a"),
    *("table", "thead", "tbody", "tr", "th", "td"),
}
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}, "code": {"class"}}
URL_SCHEMES = {"http", "https", "mailto"}


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
        ["table", "strikethrough"]
    )


def render_markdown(text: str) -> SafeString:
    """``text`` (markdown) as sanitised HTML, marked safe for a template."""
    html = _parser().render(text or "")
    clean = nh3.clean(
        html,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        filter_style_properties={"text-align"},
    )
    return mark_safe(clean)  # sanitised by nh3 just above
