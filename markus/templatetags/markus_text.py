"""``{% load markus_text %}``: ``text|markdown``, an agent's or a person's markdown as
sanitised HTML (``markus.reports.rendering``: no raw HTML, safe links only); and
``{% chat_text_max %}``, ``{% comment_max %}`` and ``{% title_max %}`` (a task's or a
requirement's title), the
limits a page states beside its box and the server checks (a ``maxlength`` would cut a
longer paste in silence)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from markus.core.limits import CHAT_TEXT_MAX_CHARS
from markus.reports.rendering import render_markdown
from markus.work.comment_services import MAX_COMMENT_LENGTH
from markus.work.models import Task

register = template.Library()


@register.filter(name="markdown")
def markdown(text: object) -> SafeString:
    return render_markdown(text if isinstance(text, str) else "")


@register.simple_tag
def chat_text_max() -> int:
    return CHAT_TEXT_MAX_CHARS


@register.simple_tag
def title_max() -> int:
    return int(Task._meta.get_field("title").max_length or 0)


@register.simple_tag
def comment_max() -> int:
    return MAX_COMMENT_LENGTH
