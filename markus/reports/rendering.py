"""Markdown that agents write (daily reports), as HTML safe to put in a page.

``markdown-it-py`` (CommonMark, plus tables and strikethrough) renders it with raw HTML
off, so a tag in the text comes out escaped; ``nh3`` (the Ammonia sanitiser) then keeps
only the tags and attributes a report uses, links to http(s) and mailto only, with
``rel="noopener noreferrer nofollow"``. The text is the agent's: it may carry whatever
a prompt or a tool result put into it, so both steps stay.

An image is shown only from this site (a path) or as a ``data:image`` of its own: an
address elsewhere would tell that site who reads the page. Any other image becomes its
alt text as a link to it, so nothing the agent wrote disappears.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from html import escape

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

TAGS = {
    *("p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "code"),
    *("ul", "ol", "li", "strong", "em", "s", "del", "a"),
    *("table", "thead", "tbody", "tr", "th", "td", "img"),
}
ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt"},
    "ol": {"start"},
    "th": {"style"},
    "td": {"style"},
    "code": {"class"},
}
# ``data`` is for an image's own pixels only: ``_attribute`` refuses it anywhere else.
URL_SCHEMES = {"http", "https", "mailto", "data"}
# An image shown as it is: a path on this site, or a picture in the text itself.
SHOWN_IMAGE = re.compile(r"/(?!/)|data:image/(png|gif|jpeg|webp);base64,", re.IGNORECASE)


def _image(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """An image shown, or its alt text linked to it (see the module's docstring)."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    if SHOWN_IMAGE.match(src):
        return f'<img src="{escape(src)}" alt="{escape(alt)}">'
    return f'<a href="{escape(src)}">{escape(alt or "image")}</a>'


def _attribute(tag: str, attribute: str, value: str) -> str | None:
    if attribute in ("src", "href") and value.lower().startswith("data:"):
        return value if tag == "img" and SHOWN_IMAGE.match(value) else None
    if tag == "img" and attribute == "src" and not SHOWN_IMAGE.match(value):
        return None
    return value


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    parser = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    parser.enable(["table", "strikethrough"]).add_render_rule("image", _image)
    return parser


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
        attribute_filter=_attribute,
    )
    return mark_safe(clean)  # sanitised by nh3 just above
