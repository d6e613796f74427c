"""Scenario 7: kill -9 a worker right after it committed a task transition (a task
submitted for review, or completed by its reviewer), before it relays the transition's
bus record. The record was written to the outbox in the transition's transaction; the
beat sweep must relay it, and every record must be published exactly once (one stream
with one chunk per audience agent, one relay audit).

The moment: a trigger on the scenario's own database NOTIFYs the test at the commit of
each outbox row with the writer's application_name (which process committed it); the
test SIGKILLs that worker at once, and records whether the row had been relayed yet."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from .figures import assert_invariants, collect, settle
from .harness import Api, Cluster, LoadGenerator, Plan, boot, requests_for

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

KILLS = 3
NOTIFY_ON_COMMIT = """
CREATE FUNCTION faults_outbox_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('faults_outbox', json_build_object(
    'id', NEW.id, 'topic', NEW.topic, 'app', current_setting('application_name'))::text);
  RETURN NEW;
END $$;
CREATE TRIGGER faults_outbox_written AFTER INSERT ON agentbus_outbox
  FOR EACH ROW EXECUTE FUNCTION faults_outbox_written();
"""


def kill_after_commits(cluster: Cluster, kills: int, within: float) -> list[str]:
    """Kill a worker at the commit of a transition it made, ``kills`` times (then
    restart it). Returns, per kill, the topic and the row's state at the kill."""
    from agentbus.models import OutboxRecord

    done: list[str] = []
    spare_until = 0.0  # the restarted worker gets a few seconds before it is a victim again
    deadline = time.monotonic() + within
    with cluster.pg.connect(cluster.db_name) as listener:
        listener.execute("LISTEN faults_outbox")
        while len(done) < kills and time.monotonic() < deadline:
            for note in listener.notifies(timeout=0.5, stop_after=1):
                row = json.loads(note.payload)
                name = str(row["app"]).removeprefix("faults-")
                if name not in ("w1", "w2") or time.monotonic() < spare_until:
                    continue
                cluster.kill(name)
                state = OutboxRecord.objects.filter(id=row["id"]).values_list("status", "attempts").first()
                when = "before_relay" if state == ("pending", 0) else f"{state[0]}/{state[1]}" if state else "gone"
                done.append(f"{row['topic']}:{when}:{row['id']}")
                cluster.start_worker(name)
                spare_until = time.monotonic() + 3.0
    return done


def published() -> tuple[int, list[str], list[str]]:
    """(rows, rows not published exactly once, rows published more than once)."""
    from agentbus.models import AuditEvent, Chunk, OutboxRecord, Stream

    chunks = Counter(Chunk.objects.filter(stream__id__startswith="outbox.").values_list("stream_id", flat=True))
    streams = set(Stream.objects.filter(id__startswith="outbox.").values_list("id", flat=True))
    relays = Counter(
        detail.get("outboxId") for detail in AuditEvent.objects.filter(action="relay").values_list("detail", flat=True)
    )
    rows = list(OutboxRecord.objects.values("id", "status", "audience"))
    missing, twice = [], []
    for r in rows:
        ids = [f"outbox.{r['id']}.{agent}" for agent in r["audience"]]
        counts = [chunks.get(i, 0) for i in ids]
        if r["status"] != "relayed" or any(i not in streams for i in ids) or 0 in counts:
            missing.append(f"{r['id']}:{r['status']}")
        if any(n > 1 for n in counts) or relays.get(r["id"], 0) > 1:
            twice.append(str(r["id"]))
    return len(rows), missing, twice


def relay_lags(ids: list[int]) -> list[float]:
    """Seconds from an outbox row's commit to its relay (-1: not relayed)."""
    from agentbus.models import OutboxRecord

    rows = {r.id: r for r in OutboxRecord.objects.filter(id__in=ids)}
    return [
        (rows[i].relayed_at - rows[i].created_at).total_seconds() if i in rows and rows[i].relayed_at else -1.0
        for i in ids
    ]


def test_kill_9_right_after_a_task_transition_commits_relays_its_record_once(cluster, report, clock):
    cluster.sql(NOTIFY_ON_COMMIT)
    seeded = boot(cluster)
    plan = Plan(chats=2, events=2, tasks=3, seconds=8.0)
    load = LoadGenerator(Api(cluster.base, seeded.token), requests_for(seeded.agents, plan), plan.seconds).start()
    kills = kill_after_commits(cluster, KILLS, within=60)
    load.join()
    settled = settle(90)
    rows, missing, twice = published()
    figures = collect(others="n/a")
    before = sum(1 for k in kills if ":before_relay:" in k)
    lags = relay_lags([int(k.rsplit(":", 1)[1]) for k in kills])
    figures.extra = (
        f"kills={len(kills)}({' '.join(k.rsplit(':', 1)[0] for k in kills)}) killed_before_relay={before} "
        f"their_relay_lag=[{','.join(f'{lag:.1f}s' for lag in lags)}] bus_records={rows} "
        f"published_once={rows - len(missing) - len(twice)} unpublished={len(missing)} published_twice={len(twice)}"
    )
    report(figures.line("7 kill-after-transition", clock()))
    assert len(kills) == KILLS, f"only {len(kills)} kills landed after a worker's transition"
    assert not missing, f"outbox records not published: {missing[:8]}"
    assert not twice, f"outbox records published more than once: {twice[:8]}"
    assert_invariants(figures, settled)
