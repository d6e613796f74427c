"""Long sessions fit the model (ARCHITECTURE decision 19): before a call, a session whose
request would pass ``MARKUS_LLM_COMPACT_AT`` of the model's context
(``MARKUS_LLM_CONTEXT_TOKENS``) has its older tool results cut, oldest first, each with
a note of what it was; the item's goal (the first message) and the latest turns stay
whole. What was cut stays cut (the session is stored so)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from markus.llm.base import CHARS_PER_TOKEN

from .model_call import estimate_tokens
from .models import LLMSession

#: The latest messages that are never cut (the last turns and their results).
KEEP_LATEST = 6
#: What a cut result keeps of its beginning.
KEPT_CHARS = 160
CUT_NOTE = "[cut to fit the model's context: {n} characters; it began: {head}…]"


def budget() -> int:
    m = settings.MARKUS
    return int(int(m["LLM_CONTEXT_TOKENS"]) * float(m["LLM_COMPACT_AT"]))


def compact(session: LLMSession, *, system: str, tools: list[dict[str, Any]]) -> bool:
    """Cut older tool results (then older long texts) until the request fits; True if
    anything was cut. The request is measured once; each cut takes off what it saved."""
    limit = budget()
    messages = session.messages
    size = estimate_tokens(system, messages, tools)
    if size <= limit:
        return False
    cut = False
    for roles in (("tool",), ("tool", "assistant", "user")):
        for message in messages[1 : max(1, len(messages) - KEEP_LATEST)]:
            content = message.get("content")
            if message.get("role") not in roles or not isinstance(content, str) or len(content) <= KEPT_CHARS * 2:
                continue
            if content.startswith("[cut to fit"):
                continue
            message["content"] = CUT_NOTE.format(n=len(content), head=content[:KEPT_CHARS])
            size -= (len(json.dumps(content)) - len(json.dumps(message["content"]))) // CHARS_PER_TOKEN
            cut = True
            if size <= limit:
                return True
    return cut
