"""Scenario 14 (issue 35, point 3): a tool server's tool that claims to only read
(``readOnlyHint``, no ``idempotentHint``) but writes is not made again when its worker is
killed mid-call (ARCHITECTURE decision 14: only a declared ``idempotentHint``, or the
operator's word, makes a call repeatable; a read-only hint is no promise).

The MCP test server (tests/toolservers/counter_server.py ``--claim-read-only``) is a stdio
tool server every worker starts itself; its ``increment`` says it only reads, so it is
offered ``auto`` (no approval), yet it logs ``started <marker>``, waits three seconds and
logs ``done <marker>``. Round after round a person asks an agent in a chat for it (``EFFECT
counter__increment <marker>``); as soon as the call started the worker holding the agent's
lease is SIGKILLed (then restarted), the next chat following at once.

Checked at the end: every marker's call was made once (one ``started`` line: no decision
of the model ran it twice), the killed calls are journalled ``done`` with their outcome
unknown, every chat was answered once and its item completed (or, caught by a second
kill while it recovered, given up with the person told: the recovery's rule)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .figures import assert_invariants, collect, settle
from .harness import PY, ROOT, Api, Cluster, boot, leased_by, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

TOOL = "counter__increment"
KILLS = 5
WORKERS = ("w1", "w2")
# How a chat's item ends: answered, or given up (in flight at a second kill) with the
# person told so.
ENDS = ("completed", "dropped")


def calls_started(effects: Path) -> dict[str, int]:
    """Per marker, the calls the server began (its ``started`` lines)."""
    text = effects.read_text() if effects.exists() else ""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        word, _, marker = line.partition(" ")
        if word == "started":
            counts[marker] = counts.get(marker, 0) + 1
    return counts


def finished(effects: Path, marker: str) -> bool:
    return f"done {marker}" in (effects.read_text() if effects.exists() else "").splitlines()


def holder(cluster: Cluster, agent_id: str) -> str | None:
    """The worker whose live lease on the agent has an item in flight."""
    return next((n for n in WORKERS if agent_id in leased_by(cluster.procs[n].pid)), None)


def answered(item_id: str) -> int:
    from markus.agents.models import ChatMessage

    return ChatMessage.objects.filter(role="assistant", metadata__mailboxItemIds__contains=[item_id]).count()


def ask_then_kill(cluster: Cluster, api: Api, effects: Path, agent_id: str, marker: str) -> str:
    """Ask the agent in a chat for the call; kill -9 the worker making it as soon as the
    server began it, then restart that worker. Returns the chat's item."""
    text = f"EFFECT {TOOL} {marker}"
    status, item = api.post(
        f"/api/agents/{agent_id}/mailbox", {"sourceType": "human_chat", "payload": {"summary": text, "content": text}}
    )
    assert status == 201, item
    wait_until(lambda: calls_started(effects).get(marker), timeout=40, interval=0.05, what=f"started {marker}")
    victim = wait_until(lambda: holder(cluster, agent_id), timeout=5, interval=0.05, what="the lease holder")
    assert not finished(effects, marker), "the call finished before the kill"
    cluster.kill(victim)
    cluster.start_worker(victim)
    return str(item["id"])


def test_kill_9_during_a_call_of_a_tool_claiming_read_only_never_makes_it_twice(cluster, tmp_path, report, clock):
    from attention.models import ToolCallRecord
    from mailbox.models import MailboxItem
    from markus.agents.models import Agent
    from markus.toolservers.models import ToolServer
    from notifications.models import Approval

    seeded = boot(cluster, agents=3, workers=WORKERS)
    effects = tmp_path / "effects.log"
    server = ToolServer.objects.create(
        name="counter",
        transport="stdio",
        command=PY,
        args=[str(ROOT / "tests" / "toolservers" / "counter_server.py"), "--log", str(effects), "--claim-read-only"],
        timeout_seconds=20,
    )
    server.agents.add(*Agent.objects.filter(id__in=seeded.agents))
    api = Api(cluster.base, seeded.token)

    asked: dict[str, str] = {}  # marker -> item; every one's call was in flight at a kill
    for n in range(KILLS):
        marker = f"mkr-readonly-{n}"
        asked[marker] = ask_then_kill(cluster, api, effects, seeded.agents[n % len(seeded.agents)], marker)

    wait_until(
        lambda: (
            all(answered(i) for i in asked.values())
            and not MailboxItem.objects.filter(id__in=asked.values()).exclude(status__in=ENDS).exists()
        ),
        timeout=60,
        interval=0.25,
        what="every chat answered and its item ended",
    )
    cluster.wait_workers(*WORKERS)
    settled = settle(30)

    started = calls_started(effects)
    repeats = sum(max(0, started.get(m, 0) - 1) for m in asked)
    rows = {m: list(ToolCallRecord.objects.filter(mailbox_item_id=i, name=TOOL)) for m, i in asked.items()}
    given_up = set(MailboxItem.objects.filter(id__in=asked.values(), status="dropped").values_list("id", flat=True))
    figures = collect()
    figures.extra = (
        f"kills={len(asked)} calls={sum(started.get(m, 0) for m in asked)} repeats={repeats} "
        f"asked={cluster.llm.calls['effect']} given_up={len(given_up)} "
        f"journal={sorted(r.state for rs in rows.values() for r in rs)}"
    )
    report(figures.line("14 kill-during-read-only-claimed-call", clock()))
    listed = {t["name"]: t for t in ToolServer.objects.get(name="counter").tools}
    assert listed["increment"].get("annotations") == {"readOnlyHint": True}, listed["increment"]
    assert not Approval.objects.exists(), "a read-only tool is offered auto: nothing to approve"
    assert repeats == 0, f"calls made again after a crash: {started}"
    assert all(started.get(m) == 1 for m in asked), started  # none lost either
    for marker in asked:
        assert len(rows[marker]) == 1, [(r.attempt, r.state) for r in rows[marker]]
        row = rows[marker][0]
        if asked[marker] not in given_up:  # recovered: its outcome unknown, not made again
            assert row.state == "done" and row.ok is False and "in flight" in row.result, (row.state, row.result)
    assert all(answered(i) == 1 for i in asked.values()), {m: answered(i) for m, i in asked.items()}
    assert_invariants(figures, settled)
