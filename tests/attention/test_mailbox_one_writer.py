"""``mailbox/`` is the only writer of ``mailbox_items`` (ARCHITECTURE decision 9).

Two checks: the source has no write to the table outside ``mailbox/`` (an ORM write on
``MailboxItem``, or SQL naming the table), and a run of the product's flows (tasks,
review, chat, approval, console, recovery, the sweep) sends no INSERT, UPDATE or
DELETE on the table from a frame outside ``mailbox/``.
"""

from __future__ import annotations

import re
import traceback
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

ROOT = Path(__file__).resolve().parent.parent.parent
SKIP_DIRS = {"tests", "migrations", ".venv", "var", ".git", "node_modules", "__pycache__", "mailbox"}
# The benchmark's baseline is bare SQL on purpose: what the service is compared with.
EXEMPT = {
    "markus/bench/mailbox.py": "bare-SQL baseline of the mailbox bench",
    # Benchmarks make and remove the rows of their own throwaway agents.
    "markus/bench/peers.py": "removes its throwaway agent's rows",
    "markus/bench/websocket.py": "removes its throwaway agent's rows",
    "markus/bench/timeline.py": "writes the 100,000 history rows it pages through",
    "markus/bench/scale_queue.py": "writes the queued rows it measures and removes them",
}

ORM_WRITE = re.compile(
    r"MailboxItem\.objects\b[^\n]*\.(update|delete|create|bulk_create|bulk_update|get_or_create|update_or_create)\("
)
SQL_WRITE = re.compile(r"(UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+\"?mailbox_items", re.I)


def test_no_source_outside_the_mailbox_app_writes_mailbox_items():
    offenders = []
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if set(rel.parts) & SKIP_DIRS or rel.as_posix() in EXEMPT:
            continue
        for lineno, line in enumerate(path.read_text(errors="ignore").splitlines(), 1):
            if ORM_WRITE.search(line) or SQL_WRITE.search(line):
                offenders.append(f"{rel}:{lineno}: {line.strip()}")
    assert offenders == [], "writes to mailbox_items outside mailbox/:\n" + "\n".join(offenders)


class WriteOrigins:
    """An execute wrapper that notes, for every write to mailbox_items, the innermost
    frame of the project's own code that issued it."""

    def __init__(self):
        self.writes: list[tuple[str, str]] = []

    def __call__(self, execute, sql, params, many, context):
        if SQL_WRITE.search(sql or ""):
            self.writes.append((self._origin(), sql.split()[0]))
        return execute(sql, params, many, context)

    @staticmethod
    def _origin() -> str:
        for frame in reversed(traceback.extract_stack()[:-2]):
            path = Path(frame.filename).resolve()
            try:
                rel = path.relative_to(ROOT)
            except ValueError:
                continue  # Django, the standard library, a package
            if rel.parts[0] not in (".venv", "tests"):
                return f"{rel.as_posix()}:{frame.name}"
        return "tests"


@pytest.mark.django_db(transaction=True)
@pytest.mark.pg
def test_the_product_flows_write_mailbox_items_only_through_the_mailbox_app(agent, alice, team, monkeypatch, scripted):
    from django.conf import settings

    from attention import services as attention_services
    from attention.lease import lease_take
    from attention.loop import run_attention
    from attention.models import AgentAttention
    from mailbox import lifecycle
    from mailbox.registry import MailboxType as T
    from mailbox.services import mailbox_enqueue
    from markus.agents.services import agent_create
    from markus.console.services import console_drop_item, console_retry_item
    from markus.core.actors import Actor
    from markus.llm.scripted import Turn
    from markus.work.services import task_comment_create, task_create
    from notifications.models import Approval
    from notifications.services import approval_respond

    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", False)
    monkeypatch.setattr(attention_services, "wake", lambda *a, **k: None)
    bea, _ = agent_create(name="Bea", role="engineer", owner=alice, team=team, agent_id="bea")
    origins = WriteOrigins()
    with connection.execute_wrapper(origins):
        human = Actor.for_user(alice)
        # A task executed by bea, reviewed by ada; a human comments meanwhile.
        task = task_create(actor=human, title="Parser", assignee_id=bea.id, reviewer_agent_id=agent.id)
        task_comment_create(task_id=task.id, actor=human, content="edge cases please")
        scripted(
            Turn(text="noted"),
            Turn(tool_calls=[("task_submit_review", {"task_id": task.id, "summary": "parser.py"})]),
            Turn(text="submitted"),
            Turn(tool_calls=[("task_update", {"task_id": task.id, "status": "completed"})]),
            Turn(text="reviewed"),
            default=Turn(text="ok"),
        )
        run_attention(bea.id)
        run_attention(agent.id)
        # A human reviewer: the approval parks nothing, answering it completes the task.
        second = task_create(actor=human, title="Docs", assignee_id=bea.id, reviewer_user_id=alice.pk)
        run_attention(bea.id)
        # A chat, a heartbeat pair, a crash mid-item and the next worker's recovery.
        mailbox_enqueue(
            agent_id=agent.id,
            source_type=T.HUMAN_CHAT,
            payload={"summary": "hi", "content": "hi"},
            metadata={"senderId": str(alice.pk), "senderName": "alice", "senderRole": "user"},
        )
        for _ in range(2):
            mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "hb", "content": "hb"})
        lease = lease_take(agent.id, seconds=30)
        lifecycle.claim_next(agent_id=agent.id, epoch=lease.epoch)
        AgentAttention.objects.filter(agent_id=agent.id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
        run_attention(agent.id)
        # The operator: drop a queued item, retry a finished one; the sweep's repair.
        queued = mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "x", "content": "x"}
        )
        console_drop_item(item_id=queued.id, reason="not needed", operator=alice)
        console_retry_item(item_id=queued.id, operator=alice)
        attention_services.sweep()
        pending = Approval.objects.filter(status=Approval.State.PENDING).first()
        if pending is not None:
            approval_respond(user=alice, approval_id=pending.id, selected_option="approve")
        run_attention(bea.id)
        run_attention(agent.id)
    assert second.id
    kinds = {kind.upper() for _, kind in origins.writes}
    assert {"INSERT", "UPDATE"} <= kinds, "the flows wrote nothing: the check would be vacuous"
    outside = sorted({origin for origin, _ in origins.writes if not origin.startswith("mailbox/")})
    assert outside == [], f"mailbox_items written from outside mailbox/: {outside}"
