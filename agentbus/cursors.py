"""The inbox cursor: opaque to clients, ``base64url(JSON {"v": 1, "a": agent, "p": n})``.

``p`` is an inbox position (see ``models``). The agent id is inside so that another
agent's cursor is recognised and ignored instead of applied. Anything that does not
decode to a cursor of this agent at or below the current clock is *ignored*, never
applied as a bound: a watcher over-delivers, it never under-delivers.
"""

from __future__ import annotations

import base64
import binascii
import json

MAX_CURSOR_LENGTH = 512


def encode_cursor(agent_id: str, position: int) -> str:
    raw = json.dumps({"v": 1, "a": agent_id, "p": int(position)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(value: object, *, agent_id: str, clock: int) -> int | None:
    """The position a cursor stands for, or None when it must be ignored (absent,
    garbage, overlong, negative, another agent's, or beyond the clock)."""
    if not isinstance(value, str) or not value or len(value) > MAX_CURSOR_LENGTH:
        return None
    try:
        padded = value + "=" * (-len(value) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError, binascii.Error):
        return None
    if not isinstance(data, dict) or data.get("v") != 1 or data.get("a") != agent_id:
        return None
    position = data.get("p")
    if isinstance(position, bool) or not isinstance(position, int):
        return None
    if not 0 <= position <= clock:
        return None
    return position
