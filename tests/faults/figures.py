"""The figures each scenario prints, read from the records the system leaves behind.

- items: mailbox items in the scenario's database;
- lost: items whose fate is open after the settle period (queued, processing, deferred,
  directly or through the item they were merged into), or dropped without a reason;
- processed twice: items whose processing finished successfully in more than one
  activity (a ``completed`` status log in an activity that ended with success), or a
  chat answered by more than one reply;
- overlaps: pairs of activities of one agent that ran at the same time (an activity
  left open by a dead or stale worker ends, for this count, when a later lease epoch
  wrote its first record);
- stale writes: decisions, activities (start and end) and activity logs written under
  a lease epoch after a later epoch of the same agent had written its first record;
- dropped: items dropped, by reason (the text before the first colon);
- stalled: tasks in_progress / review without a waker
  (``markus.work.liveness.waiting_without_waker``);
- others: the scenario's measure of the unaffected agents' progress.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

OPEN = ("queued", "processing", "deferred")


@dataclass
class Figures:
    items: int = 0
    lost: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    overlaps: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    stalled: list[str] = field(default_factory=list)
    tasks: Counter = field(default_factory=Counter)
    # Deliberations that ended without a decision: the stub always decides when offered
    # complete_deliberation, so any here means it no longer speaks the loop's protocol.
    undecided: int = 0
    others: str = "n/a"
    extra: str = ""

    def line(self, scenario: str, seconds: float) -> str:
        dropped = sum(self.dropped.values())
        reasons = ",".join(f"{r}:{n}" for r, n in sorted(self.dropped.items()))
        tasks = ",".join(f"{s}:{n}" for s, n in sorted(self.tasks.items()))
        text = (
            f"FAULTS {scenario}: items={self.items} lost={len(self.lost)} processed_twice={len(self.twice)} "
            f"overlaps={len(self.overlaps)} stale_writes={len(self.stale)} "
            f"dropped={dropped}{f'({reasons})' if reasons else ''} stalled_tasks={len(self.stalled)} "
            f"tasks=({tasks}) others={self.others}"
        )
        if self.undecided:
            text += f" undecided_deliberations={self.undecided}"
        if self.extra:
            text += f" {self.extra}"
        return f"{text} time={seconds:.0f}s"

    def problems(self) -> str:
        """The offending ids, for assertion messages."""
        parts = [
            ("lost", self.lost),
            ("processed twice", self.twice),
            ("overlaps", self.overlaps),
            ("stale writes", self.stale),
            ("stalled tasks", self.stalled),
        ]
        return "; ".join(f"{name}: {ids[:8]}" for name, ids in parts if ids)


def collect(others: str = "n/a") -> Figures:
    from attention.models import AgentActivityLog
    from mailbox.models import MailboxItem
    from markus.work.models import Task

    f = Figures(others=others)
    rows = {r["id"]: r for r in MailboxItem.objects.values("id", "status", "merged_into_id", "drop_reason")}
    f.items = len(rows)
    for r in rows.values():
        fate = _fate(r, rows)
        if (
            fate["status"] in OPEN
            or fate["status"] == "merged"
            or (fate["status"] == "dropped" and not fate["drop_reason"])
        ):
            f.lost.append(r["id"])
        if r["status"] == "dropped":
            f.dropped[(r["drop_reason"] or "no reason").split(":")[0][:40]] += 1
    f.twice = processed_twice()
    f.overlaps, f.stale = overlaps_and_stale_writes()
    f.stalled = stalled_tasks()
    f.tasks = Counter(Task.objects.values_list("status", flat=True))
    f.undecided = AgentActivityLog.objects.filter(content__startswith="deliberation discarded: no decision").count()
    return f


def _fate(row: dict, rows: dict[str, dict]) -> dict:
    seen = set()
    while row["status"] == "merged" and row["merged_into_id"] in rows and row["id"] not in seen:
        seen.add(row["id"])
        row = rows[row["merged_into_id"]]
    return row


def processed_twice() -> list[str]:
    from attention.models import AgentActivityLog
    from markus.agents.models import ChatMessage

    finished = Counter(
        AgentActivityLog.objects.filter(
            type="status",
            content__startswith="completed",
            activity__success=True,
            activity__ended_at__isnull=False,
            activity__mailbox_item__isnull=False,
        ).values_list("activity__mailbox_item_id", flat=True)
    )
    answered: Counter = Counter()
    for metadata in ChatMessage.objects.filter(role="assistant").values_list("metadata", flat=True):
        for item_id in (metadata or {}).get("mailboxItemIds") or []:
            answered[item_id] += 1
    return sorted({i for i, n in finished.items() if n > 1} | {i for i, n in answered.items() if n > 1})


def overlaps_and_stale_writes() -> tuple[list[str], list[str]]:
    from attention.models import AgentActivity, AgentActivityLog, AgentDecision

    records: dict[str, list[tuple[datetime, int, str]]] = defaultdict(list)
    activities: dict[str, list[tuple[datetime, datetime | None, int, str]]] = defaultdict(list)
    epoch_of: dict[str, tuple[str, int]] = {}
    for a in AgentActivity.objects.values("id", "agent_id", "started_at", "ended_at", "created_at", "lease_epoch"):
        if a["lease_epoch"] is None:
            continue
        epoch_of[a["id"]] = (a["agent_id"], a["lease_epoch"])
        activities[a["agent_id"]].append((a["started_at"], a["ended_at"], a["lease_epoch"], a["id"]))
        # The activity's first stamp: its writer sets started_at just before the row's
        # created_at, and a later epoch's first record supersedes the open activities of
        # the earlier ones (a worker killed mid-activity) from that instant.
        records[a["agent_id"]].append((min(a["started_at"], a["created_at"]), a["lease_epoch"], a["id"]))
        if a["ended_at"] is not None:
            records[a["agent_id"]].append((a["ended_at"], a["lease_epoch"], f"{a['id']}:end"))
    for d in AgentDecision.objects.exclude(lease_epoch=None).values("id", "agent_id", "created_at", "lease_epoch"):
        records[d["agent_id"]].append((d["created_at"], d["lease_epoch"], d["id"]))
    for log in AgentActivityLog.objects.values("id", "activity_id", "created_at"):
        if log["activity_id"] in epoch_of:
            agent, epoch = epoch_of[log["activity_id"]]
            records[agent].append((log["created_at"], epoch, f"log{log['id']}"))
    stale: list[str] = []
    overlaps: list[str] = []
    now = datetime.now().astimezone() + timedelta(days=1)
    for agent, recs in records.items():
        first: dict[int, datetime] = {}
        for at, epoch, _ in sorted(recs):
            first.setdefault(epoch, at)
        # The earliest first record among the epochs after e: when e was superseded.
        superseded: dict[int, datetime] = {}
        later = now
        for epoch in sorted(first, reverse=True):
            superseded[epoch] = later
            later = min(later, first[epoch])
        stale += [f"{agent}:{rid}@{epoch}" for at, epoch, rid in recs if at > superseded[epoch]]
        spans = sorted((start, end or superseded[epoch], aid) for start, end, epoch, aid in activities[agent])
        busy_until, busy_with = None, ""
        for start, end, aid in spans:
            if busy_until is not None and start < busy_until:
                overlaps.append(f"{agent}:{busy_with}/{aid}")
            if busy_until is None or end > busy_until:
                busy_until, busy_with = end, aid
    return overlaps, stale


def stalled_tasks() -> list[str]:
    from markus.work.liveness import waiting_without_waker
    from markus.work.models import Task

    out = []
    for task in Task.objects.filter(status__in=["in_progress", "review"]):
        reason = waiting_without_waker(task)
        if reason:
            out.append(f"{task.id}: {reason}")
    return out


# ---------------------------------------------------------------------------- progress


def completions(
    agents: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    summary_prefix: str | None = None,
) -> int:
    """Items completed (by the loop) of ``agents`` between ``since`` and ``until``;
    ``summary_prefix``: only the items a run posted (not the agents' own heartbeats)."""
    from mailbox.models import MailboxItem

    rows = MailboxItem.objects.filter(status="completed")
    if summary_prefix is not None:
        rows = rows.filter(payload__summary__startswith=summary_prefix)
    if agents is not None:
        rows = rows.filter(agent_id__in=agents)
    if since is not None:
        rows = rows.filter(completed_at__gte=since)
    if until is not None:
        rows = rows.filter(completed_at__lt=until)
    return rows.count()


def backlog(agents: list[str]) -> int:
    """Open items (queued, processing, deferred) of ``agents`` now."""
    from mailbox.models import MailboxItem

    return MailboxItem.objects.filter(agent_id__in=agents, status__in=OPEN).count()


def open_work() -> tuple[int, int, int]:
    """(open items not parked, tasks not finished, outbox rows not relayed). A task an
    agent filed that waits for a person's approval is parked on that person, like an
    item parked for an approval: no worker owes it anything."""
    from agentbus.models import OutboxRecord
    from mailbox.models import MailboxItem
    from markus.work.models import Task

    items = MailboxItem.objects.filter(status__in=OPEN).count()
    unfinished = Task.objects.filter(status__in=["pending", "in_progress", "review", "blocked"])
    tasks = unfinished.exclude(status="pending", filing_approval__isnull=False).count()
    outbox = OutboxRecord.objects.filter(status="pending").count()
    return items, tasks, outbox


def settle(timeout: float, *, quiet: float = 3.0) -> bool:
    """Wait until no item is open, every task has finished and the outbox is relayed,
    then ``quiet`` seconds more with the sweep running. False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if open_work() == (0, 0, 0):
            time.sleep(quiet)
            if open_work() == (0, 0, 0):
                return True
        time.sleep(0.5)
    return False


def assert_invariants(f: Figures, settled: bool) -> None:
    """lost 0, processed twice 0, overlaps 0, stale writes 0, stalled tasks 0."""
    assert settled, f"the work did not settle: open (items, tasks, outbox) = {open_work()}; {f.problems()}"
    assert not f.lost, f"lost items: {f.problems()}"
    assert not f.twice, f"items processed twice: {f.problems()}"
    assert not f.overlaps, f"overlapping processing: {f.problems()}"
    assert not f.stale, f"stale writes: {f.problems()}"
    assert not f.stalled, f"stalled tasks: {f.problems()}"
    assert not f.undecided, f"{f.undecided} deliberations ran out of turns: the LLM stub no longer decides"
