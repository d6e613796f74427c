"""Helpers of the deliberation scenarios (tier-2 triage and batches under faults).

- ``DeliberatingLLM``: the slow LLM stub that also deliberates. A call that offers
  ``complete_deliberation`` thinks for ``deliberate_s`` and then decides: the first item
  listed, with (``batch``) every other listed system event as its batch. A working turn
  on a batch (its opening names "[Batch item 1 of …") thinks for ``batch_work_s``, a
  turn that offers a tool of ``slow_if_offered`` (``memory_consolidate``: a dream) as
  long as it says.
- ``TRANSITIONS``: a trigger on the scenario's database that logs every status change of
  a mailbox item, committed or not, with the writer's process (application_name), the
  agent's lease owner as the writer's transaction saw it, and the transaction id: the
  count of completions per item, of writes by a process that did not hold the lease,
  and whether a batch completed in one transaction.
- ``deliberation_in_flight``: the open deliberation of a live lease held by a worker.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from .harness import Cluster
from .stub_llm import SlowLLM

BATCH_OPENING = "[Batch item 1 of "


class DeliberatingLLM(SlowLLM):
    def __init__(
        self,
        *,
        deliberate_s: float,
        batch: bool = False,
        batch_work_s: float = 0.0,
        slow_if_offered: dict[str, float] | None = None,
    ) -> None:
        super().__init__(think=(0.1, 0.25), deliberate_s=deliberate_s, batch=batch)
        self.batch_work_s = batch_work_s
        self.slow_if_offered = slow_if_offered or {}  # a tool offered → think this long
        self.calls.update(batch_work=0, slow=0)

    def answer(self, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        messages = body.get("messages") or []
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        users = [str(m.get("content") or "") for m in messages if m.get("role") == "user"]
        slow = [self.slow_if_offered[name] for name in tools if name in self.slow_if_offered]
        if slow and body.get("max_tokens") != 3:
            self._count("slow")
            time.sleep(max(slow))
        elif self.batch_work_s and any(BATCH_OPENING in u for u in users) and body.get("max_tokens") != 3:
            self._count("batch_work")
            time.sleep(self.batch_work_s)
        return super().answer(body)


def use_stub(cluster: Cluster, stub: DeliberatingLLM) -> None:
    """The processes the scenario starts call ``stub`` instead of the suite's stub."""
    cluster.llm_url = stub.url
    cluster.llm = stub


# ---------------------------------------------------------------------------- the transition log

TRANSITIONS = """
CREATE TABLE faults_transitions (
  id bigserial PRIMARY KEY, item_id text, agent_id text, old text, new text, marks jsonb,
  app text, owner text, epoch bigint, txid bigint, at timestamptz DEFAULT clock_timestamp());
CREATE FUNCTION faults_transition() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.status IS DISTINCT FROM OLD.status THEN
    INSERT INTO faults_transitions (item_id, agent_id, old, new, marks, app, owner, epoch, txid)
    SELECT NEW.id, NEW.agent_id, OLD.status, NEW.status, NEW.marks, current_setting('application_name'),
           a.lease_owner, a.lease_epoch, txid_current()
    FROM (SELECT 1) one LEFT JOIN agent_attention a ON a.agent_id = NEW.agent_id;
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER faults_transition AFTER UPDATE ON mailbox_items
  FOR EACH ROW EXECUTE FUNCTION faults_transition();
"""


def install_transition_log(cluster: Cluster) -> None:
    cluster.sql(TRANSITIONS)


@dataclass
class Transition:
    item_id: str
    agent_id: str
    old: str
    new: str
    marks: dict[str, Any]
    app: str
    owner: str
    epoch: int | None
    txid: int
    at: Any


def transitions(cluster: Cluster) -> list[Transition]:
    rows = cluster.sql(
        "SELECT item_id, agent_id, old, new, marks, app, coalesce(owner, ''), epoch, txid, at"
        " FROM faults_transitions ORDER BY id"
    )
    return [Transition(*r) for r in rows]


def completions_per_item(log: list[Transition]) -> Counter:
    return Counter(t.item_id for t in log if t.new == "completed")


def completed_not_once(log: list[Transition], items: dict[str, list[str]]) -> dict[str, int]:
    """The items (ids per agent) not completed exactly once: id → completions."""
    done = completions_per_item(log)
    return {i: done.get(i, 0) for ids in items.values() for i in ids if done.get(i, 0) != 1}


def unfenced(cluster: Cluster, log: list[Transition]) -> list[str]:
    """Transitions into or out of ``processing`` written by a worker that did not hold
    the agent's lease at that moment (its pid is not in the lease owner)."""
    pids: dict[str, set[int]] = defaultdict(set)
    for p in [*cluster.retired, *cluster.procs.values()]:
        pids[f"faults-{p.name}"].add(p.pid)
    out = []
    for t in log:
        if "processing" not in (t.old, t.new) or t.app not in pids:
            continue
        if not any(f":{pid}:" in t.owner for pid in pids[t.app]):
            out.append(f"{t.item_id}:{t.old}->{t.new} by {t.app} (owner {t.owner or 'none'})")
    return out


# ---------------------------------------------------------------------------- what is in flight


@dataclass
class InFlight:
    agent_id: str
    activity_id: str
    epoch: int
    worker: str


def deliberation_in_flight(cluster: Cluster, workers: tuple[str, ...] = ("w1", "w2")) -> InFlight | None:
    """An open deliberation activity under the live lease of one of ``workers``, with
    the agent's state ``deciding``."""
    from django.utils import timezone

    from attention.models import AgentActivity, AgentAttention

    open_ = AgentActivity.objects.filter(ended_at__isnull=True, label__startswith="Deliberation").values_list(
        "id", "agent_id", "lease_epoch"
    )
    for activity_id, agent_id, epoch in open_:
        row = AgentAttention.objects.filter(
            agent_id=agent_id, lease_epoch=epoch, state="deciding", lease_expires_at__gt=timezone.now()
        ).first()
        if row is None:
            continue
        for name in workers:
            proc = cluster.procs.get(name)
            if proc is not None and proc.alive() and f":{proc.pid}:" in row.lease_owner:
                return InFlight(agent_id, activity_id, epoch, name)
    return None


def enqueue_events(agents: list[str], n: int, *, priority: int = 2) -> dict[str, list[str]]:
    """``n`` system events (of ``priority``) per agent, in one transaction (so the first
    run sees them all); the sweep wakes the agents (no wake-up from the test process)."""
    from django.db import transaction

    from mailbox.services import mailbox_enqueue

    out: dict[str, list[str]] = {}
    with transaction.atomic():
        for agent in agents:
            out[agent] = []
            for k in range(n):
                text = f"System event {k} for {agent}: nightly job {k} finished."
                payload = {"summary": text[:60], "content": text}
                item = mailbox_enqueue(agent_id=agent, source_type="system_event", payload=payload, priority=priority)
                out[agent].append(item.id)
    return out
