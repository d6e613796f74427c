"""Prefixed, time-ordered string ids (``mbx_…``, ``dec_…``, ``act_…``) as in the seed.

The hex timestamp first makes ids sort by creation time, so ``id`` is a meaningful
tie-breaker after ``queued_at``.
"""

from __future__ import annotations

import secrets
import time


def new_id(prefix: str) -> str:
    return f"{prefix}_{time.time_ns():016x}{secrets.token_hex(4)}"


# Named defaults for model fields (migrations cannot serialise lambdas).
def team_id() -> str:
    return new_id("team")


def session_id() -> str:
    return new_id("ses")


def task_id() -> str:
    return new_id("tsk")


def requirement_id() -> str:
    return new_id("req")


def comment_id() -> str:
    return new_id("cmt")


def mailbox_id() -> str:
    return new_id("mbx")


def attempt_id() -> str:
    """An LLM session's attempt: a session started afresh (a retry from a clean start)
    is a new attempt, and its tool calls a new page of the journal."""
    return new_id("att")


def decision_id() -> str:
    return new_id("dec")


def activity_id() -> str:
    return new_id("act")


def notification_id() -> str:
    return new_id("ntf")


def approval_id() -> str:
    return new_id("apr")
