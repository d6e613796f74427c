"""The mind view's live stream: agent events in, htmx out-of-band swaps out.

One ``MindStream`` per open socket. It renders the same partials the page did, fresh
from the database, so an update never differs from a reload. It remembers which items
the page holds (``known``) to tell a new item (inserted at the top) from a changed one
(swapped in place), and drops items that stop matching the page's filters.

1. ``refresh()`` on connect (and on every reconnect): header and first page, replacing
   what the page holds, so nothing sent between the page load and the subscription
   is lost.
2. ``apply(event)`` for each event of the agent's group.

The turn being produced: each ``agent:delta`` (``{mailboxItemIds, activityId, turn,
text}``) is appended, escaped, to a line of the item's live area (``#live-<item>``,
empty in every rendered item): the first piece of a turn creates the line
``#live-turn-<activity>-<turn>``, the next ones append to it. ``delta`` reads no
database (the consumer calls it on the event loop, without a thread hop). The live
lines go when the focus leaves the item (the turn's text is then in the stored
activity log).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import format_html

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents import permissions

from . import mind

DELTA = "agent:delta"  # a piece of the turn being produced (attention.replies.DELTA_EVENT)
RHYTHM = "agent:rhythm"  # the heartbeat interval, time zone or active hours changed
# A change to an item of these types redraws the reminders and the daily reports: a
# reminder set, fired or cancelled; a daily report written (its item completes).
REPORTS_TYPES = frozenset({MailboxType.REMINDER.value, MailboxType.DAILY_REPORT.value})


class MindStream:
    def __init__(
        self,
        agent_id: str,
        filters: mind.MindFilters,
        *,
        limit: int = mind.PAGE_SIZE,
        can_control: bool = False,
        reader: permissions.Reader = permissions.PUBLIC,
    ) -> None:
        self.agent_id = agent_id
        self.reader = reader  # what of private conversations the page may show
        self.can_control = can_control  # the reader may use the controls (rendered into the header and items)
        self.filters = filters
        self.limit = limit
        self.known: set[str] = set()
        self.floor: datetime | None = None  # queued_at of the oldest item on the first page, if more exist
        self.live: dict[str, tuple[str, Any]] = {}  # activity id -> (item id, turn) of its live line

    def refresh(self) -> str:
        page = mind.timeline_page(self.agent_id, self.filters, limit=self.limit, reader=self.reader)
        self.known = {e["id"] for e in page["entries"]}
        self.live = {}  # the body sent below holds empty live areas
        self.floor = page["entries"][-1]["queuedAt"] if page["next_offset"] is not None else None
        body = render_to_string("mind/_timeline_body.html", {**self._base(), **page, "oob": True})
        return self._header() + body

    def apply(self, event: dict[str, Any]) -> str:
        kind = event.get("type")
        if kind == DELTA:
            return self.delta(event)
        if kind == "agent:mailbox":
            html = self._item(event["item"]["id"]) + self._header()
            if event["item"].get("sourceType") in REPORTS_TYPES:
                html += self._reports()
            return html
        if kind == "agent:decision":
            return self._item(event["decision"]["mailboxItemId"])
        if kind in ("agent:attention", "agent:focus"):
            focus = event.get("currentFocus" if kind == "agent:attention" else "focus")
            return self._end_live(focus.get("mailboxItemId") if isinstance(focus, dict) else None) + self._header()
        if kind in ("agent:status", RHYTHM):
            return self._header()
        return ""

    def delta(self, event: dict[str, Any]) -> str:
        """A piece of the current turn's text as an htmx append; no database work."""
        text, ids = event.get("text"), event.get("mailboxItemIds")
        if not isinstance(text, str) or not text or not isinstance(ids, list):
            return ""
        item_id = next((i for i in ids if i in self.known), None)
        if item_id is None:  # not on this page (filtered out, or not loaded)
            return ""
        activity = event.get("activityId") or item_id
        turn = event.get("turn")
        turn = turn if isinstance(turn, int) else 0
        line = f"live-turn-{activity}-{turn}"
        if self.live.get(activity) == (item_id, turn):
            return format_html('<span hx-swap-oob="beforeend:#{}">{}</span>', line, text)
        self.live[activity] = (item_id, turn)
        # Only the focused item produces text: its new turn is the header's turn count.
        return format_html(
            '<div hx-swap-oob="beforeend:#live-{}"><p id="{}" class="live-turn" data-turn="{}">{}</p></div>'
            '<b id="focus-turns" class="focus-turns" hx-swap-oob="true">{}</b>',
            item_id,
            line,
            turn,
            text,
            turn,
        )

    def _end_live(self, focused_item: str | None) -> str:
        """Clear the live areas of the items the focus has left (those still on the page)."""
        ended = {item for item, _ in self.live.values() if item != focused_item}
        if not ended:
            return ""
        self.live = {a: v for a, v in self.live.items() if v[0] not in ended}
        return "".join(_clear_live(item) for item in sorted(ended) if item in self.known)

    def _base(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "filters": self.filters, "can_control": self.can_control}

    def _header(self) -> str:
        return render_to_string(
            "mind/_header.html",
            {
                **mind.header_context(self.agent_id, live=True, can_control=self.can_control, reader=self.reader),
                "oob": True,
            },
        )

    def _reports(self) -> str:
        """The pending reminders and the daily reports, out of band (not the message
        of a cancel, which the cancel's answer brings)."""
        context = {**self._base(), **mind.reports_context(self.agent_id), "oob": True}
        return render_to_string("mind/_reminder_list.html", context) + render_to_string(
            "mind/_daily_reports.html", context
        )

    def _item(self, item_id: str) -> str:
        item = mind.load_item(self.agent_id, item_id)
        if item is None:
            return ""
        matches = self.filters.matches(item)
        if item.id in self.known:
            if matches:
                return self._render_update(item)
            self.known.discard(item.id)
            return _delete(item.id)
        if self.floor is not None and item.queued_at < self.floor:
            # Older than the first page: on the page only if "Load earlier" fetched it.
            return self._render_update(item) if matches else _delete(item.id)
        if not matches:
            return ""
        self.known.add(item.id)
        return render_to_string("mind/_item_insert.html", {**self._base(), "e": mind.present(item, self.reader)})

    def _render_update(self, item: MailboxItem) -> str:
        return render_to_string(
            "mind/_item_update.html", {**self._base(), "e": mind.present(item, self.reader), "oob": True}
        )


def _clear_live(item_id: str) -> str:
    return format_html('<div id="live-{}" class="live-turns" hx-swap-oob="innerHTML"></div>', item_id)


def _delete(item_id: str) -> str:
    return format_html('<details id="item-{}" hx-swap-oob="delete"></details>', item_id)
