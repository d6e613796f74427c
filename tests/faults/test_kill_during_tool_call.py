"""Scenario 13: kill -9 of the worker while an approved MCP tool call is in flight
(ARCHITECTURE decision 14: a tool whose effect leaves the database is recorded
``started`` before it is called; found ``started`` by recovery, a tool that is not
idempotent is not called again and the LLM is told that its outcome is unknown).

The MCP test server (tests/toolservers/counter_server.py) runs as a process of its own,
registered as the tool server ``counter`` and attached to one agent. A person asks that
agent in a chat for ``counter__increment`` (``EFFECT counter__increment <marker>``); its
policy is ``ask`` (the tool has no readOnlyHint), so the item is parked for an approval
before anything is called. The person approves it through the HTTP API; the call takes
three seconds on the server (``started <marker>`` in its log, then ``done <marker>``),
and as soon as it started the worker holding the agent's lease is SIGKILLed (then
restarted).

Checked at the end: the server made the call once (one ``started``, one ``done``
line: the call it had started finishes, none is made again), the journal row of the
call is ``done`` with the in-flight outcome, the chat was answered once and its item
completed."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from .figures import assert_invariants, collect, settle
from .harness import (
    PY,
    ROOT,
    Api,
    Cluster,
    Proc,
    boot,
    free_port,
    leased_by,
    process_env,
    spawn,
    stop_processes,
    wait_until,
)

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

MARKER = "mkr-counter-1"
TOOL = "counter__increment"
WORKERS = ("w1", "w2")


class CounterServer:
    """The MCP test server, a subprocess on a free port, and the log of its effects."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.effects = workdir / "effects.log"
        argv = [PY, str(ROOT / "tests" / "toolservers" / "counter_server.py"), "--port", str(self.port)]
        self.proc: Proc = spawn("counter", [*argv, "--log", str(self.effects)], env=process_env(), workdir=workdir)
        wait_until(self.listening, timeout=20, interval=0.1, what=f"the MCP counter server on port {self.port}")

    def listening(self) -> bool:
        if not self.proc.alive():
            raise AssertionError(f"the counter server exited with {self.proc.popen.returncode}:\n{self.proc.tail()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def lines(self, word: str) -> list[str]:
        """The log's lines ``<word> <marker>``."""
        text = self.effects.read_text() if self.effects.exists() else ""
        return [line for line in text.splitlines() if line == f"{word} {MARKER}"]


@pytest.fixture
def counter(tmp_path) -> Iterator[CounterServer]:
    server = CounterServer(tmp_path)
    try:
        yield server
    finally:
        stop_processes([server.proc])


def holder(cluster: Cluster, agent_id: str) -> str | None:
    """The worker whose live lease on the agent has an item in flight."""
    return next((n for n in WORKERS if agent_id in leased_by(cluster.procs[n].pid)), None)


def replies(item_id: str) -> list[dict]:
    from markus.agents.models import ChatMessage

    rows = ChatMessage.objects.filter(role="assistant", metadata__mailboxItemIds__contains=[item_id])
    return list(rows.values("content", "metadata"))


def test_kill_9_while_an_approved_mcp_call_runs_makes_it_once(cluster, counter, report, clock):
    from attention.models import ToolCallRecord
    from mailbox.models import MailboxItem
    from markus.agents.models import Agent
    from markus.toolservers.models import ToolServer
    from notifications.models import Approval

    seeded = boot(cluster, agents=2, workers=WORKERS)
    agent_id = seeded.agents[0]
    server = ToolServer.objects.create(name="counter", transport="http", url=counter.url, timeout_seconds=20)
    agent = Agent.objects.get(id=agent_id)
    server.agents.add(agent)
    server.offered_to.add(agent.team)
    api = Api(cluster.base, seeded.token)  # alice's: she owns the agent's team, offered the server: she approves

    text = f"EFFECT {TOOL} {MARKER}"
    status, item = api.post(
        f"/api/agents/{agent_id}/mailbox",
        {"sourceType": "human_chat", "payload": {"summary": text, "content": text}},
    )
    assert status == 201, item
    item_id = item["id"]

    # Parked for the approval before anything is called.
    approval = wait_until(
        lambda: Approval.objects.filter(agent_id=agent_id, status="pending").first(),
        timeout=30,
        what="the pending approval of the call",
    )
    parked = wait_until(
        lambda: MailboxItem.objects.filter(id=item_id, status="deferred").first(), timeout=10, what="the parked item"
    )
    assert parked.marks.get("approvalId") == approval.id, parked.marks
    awaiting = list(ToolCallRecord.objects.filter(mailbox_item_id=item_id).values_list("name", "state"))
    assert awaiting == [(TOOL, "awaiting")], awaiting
    assert not counter.lines("started"), "the tool was called before the approval"

    status, answer = api.post(f"/api/approvals/{approval.id}/respond", {"selectedOption": "approve"})
    assert status == 200, answer

    # The call runs on the server: kill the worker making it.
    wait_until(lambda: counter.lines("started"), timeout=30, interval=0.05, what=f"started {MARKER}")
    victim = wait_until(lambda: holder(cluster, agent_id), timeout=5, interval=0.05, what="the lease holder")
    assert not counter.lines("done"), "the call finished before the kill"
    started = ToolCallRecord.objects.get(mailbox_item_id=item_id, name=TOOL)
    assert started.state == "started", started.state
    cluster.kill(victim)
    killed_at = clock()
    cluster.start_worker(victim)

    # Recovered: the chat is answered, the item completed.
    wait_until(
        lambda: replies(item_id) and MailboxItem.objects.get(id=item_id).status == "completed",
        timeout=45,
        interval=0.25,
        what="the chat answered and its item completed",
    )
    answered_at = clock()
    wait_until(lambda: counter.lines("done"), timeout=10, what=f"done {MARKER} (the server finishes its call)")
    cluster.wait_workers(victim)
    settled = settle(30)

    rows = list(ToolCallRecord.objects.filter(mailbox_item_id=item_id, name=TOOL))
    chat = replies(item_id)
    figures = collect()
    figures.extra = (
        f"victim={victim} started={len(counter.lines('started'))} done={len(counter.lines('done'))} "
        f"asked={cluster.llm.calls['effect']} journal={[r.state for r in rows]} replies={len(chat)} "
        f"answered_after_kill={answered_at - killed_at:.1f}s"
    )
    report(figures.line("13 kill-during-mcp-call", clock()))
    assert len(counter.lines("started")) == 1, "the call was made more than once"
    assert len(counter.lines("done")) == 1, counter.effects.read_text()
    assert cluster.llm.calls["effect"] == 1, "the LLM was asked for the call more than once"
    assert len(rows) == 1, [(r.attempt, r.turn, r.position, r.state) for r in rows]
    row = rows[0]
    assert row.state == "done", row.state
    assert row.ok is False and "in flight" in row.result, row.result  # its outcome unknown, not made again
    assert len(chat) == 1 and not chat[0]["metadata"].get("failed"), chat  # answered, not given up
    assert MailboxItem.objects.get(id=item_id).status == "completed"
    assert_invariants(figures, settled)
