"""A message sent again with its ``Idempotency-Key`` is stored once.

A client whose answer was lost (a cut connection, a 503 after the commit) cannot tell
whether its message was stored; sent again without a key, the agent would get it twice
and answer it twice. With a key (``Idempotency-Key``, as the IETF draft "The
Idempotency-Key HTTP Header Field" names it) on a chat (``attention.chat``) or a posted
item (``mailbox.api``), the second send finds the item the first stored and the door
answers as it did (the chat's reply, or pending; the item as it stands now), with
``Idempotent-Replayed: true``.

- A key is the caller's own, per agent: another person's same key is another message.
- The same key with another request is a 422 (``KeyReused``) that stores nothing.
- Sends racing with one key store one item: the key's row is written in the item's
  transaction under a unique constraint; the loser's transaction, its item with it,
  rolls back, and it answers as a replay.
- A key lives as long as its item (``RequestKey`` is deleted with it, by the retention's
  prune too); after that the same key stores a new item.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from markus.core.errors import MarkusError
from markus.core.limits import IDEMPOTENCY_KEY_MAX_CHARS

from .models import MailboxItem, RequestKey

HEADER = "Idempotency-Key"
# On the answer to a send that found its key: the item is the first send's.
REPLAYED = "Idempotent-Replayed"
_KEY = re.compile(rf"[\x21-\x7e]{{1,{IDEMPOTENCY_KEY_MAX_CHARS}}}")


def key_rule(name: str = HEADER) -> str:
    return f"{name} must be 1 to {IDEMPOTENCY_KEY_MAX_CHARS} visible ASCII characters, no spaces (a UUID will do)"


KEY_RULE = key_rule()


class KeyReused(MarkusError):
    """The key came with another request before: 422, nothing stored."""

    status_code = 422
    code = "idempotency_key_reused"


@dataclass(frozen=True)
class Keyed:
    """A request's key, who sent it and what it asked (its fingerprint)."""

    key: str
    sender: str
    fingerprint: str


def header_key(headers: Mapping[str, str]) -> str | None:
    """The request's ``Idempotency-Key`` (None: it sent none); a malformed one is a 400
    stating the rule. The bus's append keys its message by it too (``agentbus.services``)."""
    return checked_key(headers.get(HEADER), HEADER)


def checked_key(raw: str | None, name: str = HEADER) -> str | None:
    """A key as sent (None: none), by the one rule; a malformed one is a 400 stating it
    (``name``: how the door calls it, a header or an MCP tool's argument)."""
    if raw is not None and (not isinstance(raw, str) or _KEY.fullmatch(raw) is None):
        raise MarkusError(key_rule(name), fields={name: [key_rule(name)]})
    return raw


def keyed(headers: Mapping[str, str], sender: Mapping[str, Any], request: Mapping[str, Any]) -> Keyed | None:
    """The request's key (None: it sent none), for the caller ``sender`` (the item's
    sender metadata) and the request as the door read it (its door's name included, so
    one key on two doors is two requests). A malformed key is a 400 stating the rule."""
    raw = header_key(headers)
    if raw is None:
        return None
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return Keyed(
        key=raw,
        sender=f"{sender.get('senderRole')}:{sender.get('senderId')}",
        fingerprint=hashlib.sha256(canonical.encode()).hexdigest(),
    )


def stored(agent_id: str, keyed: Keyed) -> MailboxItem | None:
    """The item an earlier send with this key stored (None: none did). KeyReused when
    that send asked something else."""
    row = (
        RequestKey.objects.filter(agent_id=agent_id, sender=keyed.sender, key=keyed.key).select_related("item").first()
    )
    if row is None:
        return None
    if row.fingerprint != keyed.fingerprint:
        raise KeyReused(
            f"this {HEADER} came with another request before (item {row.item_id}): "
            "send the same request again with it, or a new message with a new key"
        )
    return row.item


def store_once(
    agent_id: str, keyed: Keyed | None, store: Callable[[], MailboxItem], *, looked: bool = False
) -> tuple[MailboxItem, bool]:
    """``store()``'s item and False; with a key an earlier send used, that send's item
    and True (nothing stored). ``looked``: the caller asked ``stored`` already and found
    none. The key's row is written in the item's transaction: of sends racing with one
    key, one stores and the others find its item."""
    if keyed is None:
        return store(), False
    earlier = None if looked else stored(agent_id, keyed)
    if earlier is not None:
        return earlier, True
    try:
        with transaction.atomic():
            item = store()
            RequestKey.objects.create(
                agent_id=agent_id, sender=keyed.sender, key=keyed.key, item=item, fingerprint=keyed.fingerprint
            )
    except IntegrityError:
        earlier = stored(agent_id, keyed)  # a send with the same key committed first
        if earlier is None:
            raise
        return earlier, True
    return item, False
