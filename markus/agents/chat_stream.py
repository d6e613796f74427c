"""The pieces of a chat's reply as it is written, kept a while so that a stream that
dropped can resume (``Last-Event-ID`` on ``GET /api/agents/{id}/chat``, ``attention.chat``).

The loop's delta hook (``attention.replies.delta_sender``) logs each piece of a person's
chat (``log_delta``) before it sends the ``agent:delta`` event, which carries the piece's
``seq`` (1, 2, … per item, in the order written). A stream sends each piece with the
``id:`` ``<itemId>:<seq>``; a resumed one reads what it missed here (``deltas_after``),
then goes on with the live events, skipping a ``seq`` it has sent and filling a gap from
here, so every piece arrives once and in order.

Bounded: the last ``KEEP`` pieces of an item, for ``KEEP_S`` seconds after its last one.
Where: Redis (one ``EVAL`` per piece: count, append, trim, expire) when ``REDIS_URL`` is
set, so any server answers a resume; otherwise this process's memory (one process runs
both the loop and the views then). Not the database: a reply is tens to hundreds of
pieces, and the loop's statements per item stay what they were. A failure to log is
logged and the piece still goes out live, without an id to resume from."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType

log = logging.getLogger(__name__)

KEEP = 2000  # pieces of one reply
KEEP_S = 3600  # seconds after the reply's last piece


@dataclass(frozen=True)
class Piece:
    seq: int
    text: str
    run: str | None  # the activity that wrote it (a new run starts the reply over)


@dataclass(frozen=True)
class Kept:
    pieces: list[Piece]  # those after the asked ``seq``, in order
    last: int  # the last ``seq`` written for the item (0: none)
    first: int  # the oldest ``seq`` still kept (``last + 1`` when none is)


# ---------------------------------------------------------------------------- memory


class _Memory:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: dict[str, tuple[int, deque[Piece], float]] = {}

    def append(self, item_id: str, text: str, run: str | None) -> int:
        now = time.monotonic()
        with self.lock:
            if len(self.items) > 256:
                for key in [k for k, (_, _, until) in self.items.items() if until < now]:
                    del self.items[key]
            last, pieces, until = self.items.get(item_id, (0, deque(maxlen=KEEP), 0.0))
            if until and until < now:
                last, pieces = 0, deque(maxlen=KEEP)
            pieces.append(Piece(last + 1, text, run))
            self.items[item_id] = (last + 1, pieces, now + KEEP_S)
            return last + 1

    def after(self, item_id: str, seq: int) -> Kept:
        with self.lock:
            last, pieces, until = self.items.get(item_id, (0, deque(), 0.0))
            if until and until < time.monotonic():
                last, pieces = 0, deque()
            kept = list(pieces)
        first = kept[0].seq if kept else last + 1
        return Kept([p for p in kept if p.seq > seq], last, first)


# ---------------------------------------------------------------------------- Redis

_APPEND = """
local n = redis.call('INCR', KEYS[1])
redis.call('RPUSH', KEYS[2], n .. ' ' .. ARGV[1])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return n
"""


# The pieces after ARGV[1]: they follow one another, so the first kept one's number
# says where they start in the list (a resume reads what it missed, not the whole list).
_AFTER = """
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local head = redis.call('LINDEX', KEYS[2], 0)
if not head then return {last, last + 1} end
local first = tonumber(string.match(head, '^(%d+)'))
local start = math.max(0, tonumber(ARGV[1]) - first + 1)
local out = {last, first}
for _, row in ipairs(redis.call('LRANGE', KEYS[2], start, -1)) do table.insert(out, row) end
return out
"""


class _Redis:
    def __init__(self, url: str, prefix: str) -> None:
        import redis

        self.client = redis.Redis.from_url(url)
        self.prefix = prefix
        self.script = self.client.register_script(_APPEND)
        self.reader = self.client.register_script(_AFTER)

    def _keys(self, item_id: str) -> list[str]:
        base = f"{self.prefix}:chatreply:{item_id}"
        return [f"{base}:n", f"{base}:log"]

    def append(self, item_id: str, text: str, run: str | None) -> int:
        entry = json.dumps({"t": text, "r": run}, ensure_ascii=False)
        return int(self.script(keys=self._keys(item_id), args=[entry, KEEP, KEEP_S]))

    def after(self, item_id: str, seq: int) -> Kept:
        last, first, *rows = self.reader(keys=self._keys(item_id), args=[seq])
        pieces = []
        for row in rows:
            n, _, body = row.decode().partition(" ")
            data: dict[str, Any] = json.loads(body)
            pieces.append(Piece(int(n), str(data.get("t") or ""), data.get("r")))
        return Kept([p for p in pieces if p.seq > seq], int(last), int(first))


_memory = _Memory()
_stores: dict[str, _Redis] = {}


def _store() -> _Memory | _Redis:
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return _memory
    if url not in _stores:
        prefix = settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("prefix") or "asgi"
        _stores[url] = _Redis(url, prefix)
    return _stores[url]


def logs(item: MailboxItem) -> bool:
    """Whether the item's pieces are kept: a person's chat (the stream that resumes)."""
    return item.source_type == MailboxType.HUMAN_CHAT


def log_delta(item: MailboxItem, text: str, run: str | None) -> int | None:
    """Keep a piece of the item's reply; its ``seq``, or None (not a chat, or not kept)."""
    if not logs(item):
        return None
    try:
        return _store().append(item.id, text, run)
    except Exception:  # the piece still goes out live
        log.warning("could not keep a piece of the reply to %s", item.id, exc_info=True)
        return None


def deltas_after(item_id: str, seq: int) -> Kept:
    """The kept pieces of the item's reply after ``seq``."""
    return _store().after(item_id, seq)
