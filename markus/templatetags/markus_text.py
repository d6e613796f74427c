"""``{% load markus_text %}``: ``text|markdown``, an agent's or a person's markdown as
sanitised HTML (``markus.reports.rendering``: no raw HTML, safe links only)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from markus.reports.rendering import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown(text: object) -> SafeString:
    return render_markdown(text if isinstance(text, str) else "")
