"""The session store: an item's LLM session, saved under the lease so any worker can
resume it (ARCHITECTURE decision 3)."""

from __future__ import annotations

import json
import re
from typing import Any

from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import ChatSession
from markus.agents.services import main_session
from markus.core.statements import table_statements

from . import records
from .focus import Focus, HeldSession
from .lease import Fence
from .models import ActivityLogType as L
from .models import LLMSession, ToolCallRecord
from .scenarios import SESSION_RESPONSE, TASK_EXECUTION, row_for
from .session_messages import NOTE_MARK, attempt_failed, first_messages, merged_message

SESSION_PREFIX = "ls_"


def session_id(item: MailboxItem) -> str:
    return f"{SESSION_PREFIX}{item.id}"


def chat_session_id(item: MailboxItem) -> str:
    sid = (item.metadata or {}).get("sessionId")
    if sid and ChatSession.objects.filter(id=sid, agent_id=item.agent_id).exists():
        return sid
    return main_session(item.agent_id).id


def focus_chat_session(focus: Focus) -> str:
    """The chat session a chat item answers in, read once per focus."""
    if focus.chat_session is None:
        focus.chat_session = chat_session_id(focus.item)
    return focus.chat_session


# Every fold of one item into another gives the survivor's summary this suffix
# (mailbox.merge.bump_summary): an item without it has absorbed nothing.
_ABSORBED_SOMETHING = re.compile(r" \(\+\d+\)$")


def _absorbed(item: MailboxItem) -> list[MailboxItem]:
    if not _ABSORBED_SOMETHING.search(item.summary):
        return []
    return list(MailboxItem.objects.filter(merged_into_id=item.id, status=Status.MERGED).order_by("queued_at", "id"))


def resumed_messages(item: MailboxItem) -> list[dict[str, Any]]:
    """A session reply (a person's comment on a task the agent already finished)
    continues the task's own session: the latest saved session of its agent on its task,
    the execution's or an earlier reply's. Copied, so that session stays as it was."""
    if not row_for(item).resumes_task_session or not item.task_id:
        return []
    prior = (
        LLMSession.objects.filter(
            agent_id=item.agent_id,
            scenario__in=[TASK_EXECUTION, SESSION_RESPONSE],
            mailbox_item__payload__taskId=item.task_id,
        )
        .exclude(id=session_id(item))
        .order_by("-updated_at", "-id")
        .values_list("messages", flat=True)
        .first()
    )
    return list(prior or [])


def load_session(focus: Focus) -> LLMSession:
    """A new session starts from the item's payload, which already carries everything
    merged into it; it is stored with the first write that needs it (``save_session``),
    at the latest with the item's outcome. A saved one resumes where it was, and gets
    every item merged into its item since (at enqueue, by consolidation, an injected
    comment) appended."""
    known_absent = focus.held.saved is False  # the loop's queue read said so
    session = None if known_absent else LLMSession.objects.filter(id=session_id(focus.item)).first()
    if session is None:
        chat_sid = focus_chat_session(focus) if focus.row.in_chat else None
        messages = [*resumed_messages(focus.item), *first_messages(focus.item, focus.scenario, chat_sid)]
        if focus.item.attempts > 1:  # an earlier attempt may have acted already: it is told what
            made = effects_made(focus.item)
            if made:
                messages.append({"role": "user", "content": effects_note(made)})
        failed = failed_attempts_note(focus.item)
        if failed:  # a retry starts from what the failed attempts did and why they failed
            messages.append({"role": "user", "content": failed})
        session = table_statements(LLMSession).new(
            id=session_id(focus.item),
            agent_id=focus.agent.id,
            mailbox_item=focus.item,
            scenario=focus.scenario,
            messages=batch_opening(messages, focus.item, focus.batch, context=focus.batch_context),
            absorbed_ids=[m.id for m in _absorbed(focus.item)],
        )
        # A batch's items (and what was merged into them) are in the opening message.
        for member in focus.batch:
            session.absorbed_ids += [member.id, *(m.id for m in _absorbed(member))]
        focus.held = HeldSession(session, stored=False, dirty=True, saved=focus.held.saved)
        return session
    focus.held = HeldSession(session, stored=True, dirty=False, saved=True)
    if focus.activity is not None:  # with the turn's first write
        focus.turn.note(records.LogLine(L.STATUS, f"resumed session at turn {session.turn_count}"))
    # What the session does not carry yet: items merged into its item (or into an item
    # of its batch) since it was saved, and items that joined its batch since.
    known = set(session.absorbed_ids)
    absorbed = _absorbed(focus.item)
    # The people's messages merged into this chat (by an earlier run, before it crashed
    # or was preempted) are answered with it.
    focus.merged_ids = [m.id for m in absorbed if row_for(m).in_chat]
    missed: list[tuple[str, dict[str, Any]]] = [(m.id, merged_message(m)) for m in absorbed]
    for i, member in enumerate(focus.batch):
        missed.append((member.id, batch_message(member, i + 2, len(focus.batch) + 1)))
        missed += [(m.id, merged_message(m)) for m in _absorbed(member)]
    missed = [(i, message) for i, message in missed if i not in known]
    left = _left_the_batch(session, focus.batch)
    if left:
        # Items the session presented as its batch that are not in it any more (handled
        # by themselves, deferred, dropped meanwhile): told, so none is handled twice; and
        # forgotten, so one that joins again is presented again.
        session.messages.append(left_batch_message(left))
        gone = {i.id for i in left}
        session.absorbed_ids = [i for i in session.absorbed_ids if i not in gone]
    if missed:
        session.messages.extend(message for _, message in missed)
        session.absorbed_ids = [*session.absorbed_ids, *(i for i, _ in missed)]
    if missed or left:
        # Stored with the turn's first write (or the outcome); a worker lost before that
        # finds the same items missing and tells them again.
        focus.held.dirty = True
    return session


def _left_the_batch(session: LLMSession, members: list[MailboxItem]) -> list[MailboxItem]:
    """Items the session took in as batch members (absorbed, yet not merged into
    anything) that are not in the batch now."""
    if not session.absorbed_ids:
        return []
    current = {m.id for m in members}
    candidates = [i for i in session.absorbed_ids if i not in current]
    if not candidates:
        return []
    return list(MailboxItem.objects.filter(id__in=candidates).exclude(status=Status.MERGED).order_by("queued_at", "id"))


_LEFT_HOW = {
    Status.COMPLETED: "already handled separately",
    Status.DROPPED: "dropped",
    Status.DEFERRED: "postponed: it will be handled later by itself",
}


def left_batch_message(items: list[MailboxItem]) -> dict[str, Any]:
    """The note a resumed batch session gets about items that left its batch."""
    lines = [
        "BATCH UPDATE: these items are no longer part of this batch; do not handle them here, "
        "handle only the items still in the batch:"
    ]
    for item in items:
        how = _LEFT_HOW.get(Status(item.status), "taken out of the batch: it will be handled by itself")
        lines.append(f"- {item.id} ({item.label}: {item.summary}): {how}")
    return {"role": "user", "content": "\n".join(lines)}


BATCH_INTRO = (
    "BATCH: the items below are handled together with the one above, in this one session. "
    "Handle each of them; your final answer covers them all."
)


def batch_message(item: MailboxItem, position: int, total: int) -> dict[str, Any]:
    """How an item of a batch reaches the session."""
    header = f"[Batch item {position} of {total}: {item.label}, {item.id}] {item.summary}".strip()
    if item.task_id:
        header += f" (task {item.task_id})"
    if item.requirement_id:
        header += f" (requirement {item.requirement_id})"
    return {"role": "user", "content": f"{header}\n\n{item.content}".strip()}


def batch_opening(
    messages: list[dict[str, Any]], lead: MailboxItem, members: list[MailboxItem], *, context: str = ""
) -> list[dict[str, Any]]:
    """A new session's opening with the batch's items after the lead's, in its last
    (user) message: one prompt presents them all. ``context``: deliberation's note on
    how to handle them together."""
    if not members:
        return messages
    total = len(members) + 1
    intro = BATCH_INTRO + (f"\n\nHow to handle them together: {context}" if context else "")
    parts = [intro, *(str(batch_message(m, i + 2, total)["content"]) for i, m in enumerate(members))]
    last = messages[-1] if messages else None
    if last is None or last.get("role") != "user":
        return [*messages, {"role": "user", "content": "\n\n---\n\n".join(parts)}]
    lead_part = f"[Batch item 1 of {total}: {lead.label}, {lead.id}] {last.get('content', '')}"
    return [*messages[:-1], {**last, "content": "\n\n---\n\n".join([lead_part, *parts])}]


def effects_made(item: MailboxItem) -> list[ToolCallRecord]:
    """The journaled calls of an item's earlier attempts that took effect, in order."""
    return list(ToolCallRecord.objects.filter(mailbox_item_id=item.id, ok=True).order_by("id")[:50])


def effects_note(rows: list[ToolCallRecord]) -> str:
    """What a session started afresh is told about the calls its earlier attempts made."""
    lines = [f"- {row.name}({json.dumps(row.arguments)[:300]}) -> {row.result[:300]}" for row in rows]
    return (
        f"{NOTE_MARK} An earlier attempt at this item already made these tool calls, and they took effect. "
        "Do not make them again; go on from there:\n" + "\n".join(lines)
    )


def save_session(tx: Fence, focus: Focus, session: LLMSession) -> None:
    """Store the session (its first store inserts it), in the phase's transaction. Both
    statements are made once per connection (``markus.core.statements``; nothing listens
    to an ``LLMSession``'s saves), not built by the ORM for every item."""
    tx.check()
    held = focus.held
    statements = table_statements(LLMSession)
    if held.session is session and not held.stored:
        session.updated_at = timezone.now()
        statements.save_new([session])
        held.stored = True
    else:
        statements.update_row(
            session.id,
            messages=session.messages,
            turn_count=session.turn_count,
            absorbed_ids=session.absorbed_ids,
            updated_at=timezone.now(),
        )
    if held.session is session:
        held.dirty = False


def append_note(item: MailboxItem, text: str) -> None:
    """Add a user-side note to an item's saved session (why it runs again)."""
    session = LLMSession.objects.filter(id=session_id(item)).first()
    if session is not None:
        session.messages = [*session.messages, {"role": "user", "content": text}]
        session.save(update_fields=["messages"])


def discard_session(item: MailboxItem) -> None:
    """Retry from a clean start."""
    LLMSession.objects.filter(id=session_id(item)).delete()


#: The mark that carries what an item's failed attempts did and why they failed (``settle``).
FAILED_ATTEMPTS = "failedAttempts"


def failed_attempts_note(item: MailboxItem) -> str:
    """What the item's failed attempts did and why each failed (the ``failedAttempts``
    mark ``settle`` keeps), for the next attempt's opening; "" when none failed."""
    attempts = [a for a in item.marks.get(FAILED_ATTEMPTS, []) if isinstance(a, dict)]
    if not attempts:
        return ""
    lines = [f"{NOTE_MARK} This item was tried {len(attempts)} time(s) before and the attempt failed:"]
    for n, attempt in enumerate(attempts, 1):
        lines.append(attempt_failed(n, str(attempt.get("reason"))))
        lines += [f"- it called {call}" for call in attempt.get("calls") or []]
    lines.append("Do not repeat what failed; take another way, or give your final answer saying what you could not do.")
    return "\n".join(lines)
