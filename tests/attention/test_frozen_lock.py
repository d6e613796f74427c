"""A frozen worker stalls only its own agent (ARCHITECTURE decision 11).

A worker frozen inside a fenced transaction (SIGSTOP, a GC pause, a debugger) keeps the
row lock on its agent's ``agent_attention`` row until PostgreSQL cuts the session
(``idle_in_transaction_session_timeout``). Meanwhile:

1. taking that agent's lease never waits for the lock: it answers "busy" at once, so
   the wake-ups the sweep keeps sending for the agent do not tie up worker threads and
   every other agent goes on at its usual pace (measured against a control run);
2. a holder whose idle transaction was cut is fenced out cleanly: its run ends as a lost
   lease ("stale"), nothing of the cut transaction lands, its thread lives on;
3. no transaction is open while the loop calls a provider (a turn, the judge, triage).

On SQLite there is one writer for the whole database: a thread that holds an IMMEDIATE
transaction blocks every writer, of every agent, for up to the busy timeout. What holds
there is the bound: the lease path answers "busy" after the busy timeout instead of
raising, and the agents go on once the writer lets go.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import pytest
from django.conf import settings
from django.db import Error as DBError
from django.db import connection
from django.utils import timezone

from attention import loop, records, services
from attention.lease import Lease, fenced, lease_take
from attention.models import AgentActivity, AgentActivityLog, AgentAttention, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.llm.base import LLMResponse, set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn

from .conftest import wait_for
from .invariants import assert_single_focus

OTHERS = 7
PER_AGENT = 4
UNSETTLED = [Status.QUEUED, Status.PROCESSING, Status.DEFERRED]


def _needs(vendor: str) -> None:
    # Routed by markers (`postgres` runs only in the PostgreSQL pass): never skipped.
    assert connection.vendor == vendor, f"this test needs {vendor}"


def _enqueue(agent_id: str, tag: str, n: int, kind: T = T.SYSTEM_EVENT, priority: int | None = None) -> list[str]:
    return [
        mailbox_enqueue(
            agent_id=agent_id,
            source_type=kind,
            priority=priority,
            payload={"summary": f"{tag}-{i}", "content": f"{tag} event {i} for {agent_id}"},
        ).id
        for i in range(n)
    ]


def _settled(ids: list[str]) -> int:
    return MailboxItem.objects.filter(id__in=ids).exclude(status__in=UNSETTLED).count()


class _Kicker:
    """Sends run_attention for one agent ten times a second: a sweep (and enqueues) that
    keep finding the agent's due work with no live lease, far more often than beat."""

    def __init__(self, agent_id: str, every: float = 0.1) -> None:
        self.agent_id, self.every = agent_id, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kicker", daemon=True)

    def __enter__(self) -> _Kicker:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            services.wake(self.agent_id)


def _batch(others: list[str], tag: str, frozen_id: str, bound: float) -> tuple[int, int, float]:
    """Enqueue PER_AGENT items for every other agent (each enqueue wakes its agent) while
    the frozen agent is kicked all along and the sweep runs every second, as beat would
    run it; (settled, total, seconds) at the bound."""
    with _Kicker(frozen_id):
        start = time.monotonic()
        ids = [i for a in others for i in _enqueue(a, tag, PER_AGENT)]
        deadline, next_sweep = start + bound, start + 1
        while time.monotonic() < deadline and _settled(ids) < len(ids):
            time.sleep(0.05)
            if time.monotonic() > next_sweep:
                services.sweep()
                next_sweep += 1
        done = _settled(ids)
        if done < len(ids):
            left = MailboxItem.objects.filter(id__in=ids, status__in=UNSETTLED).values_list("agent_id", "status")
            print(f"\n{tag}: unsettled {sorted(left)}")
        return done, len(ids), time.monotonic() - start


class _FrozenHolder:
    """A worker frozen mid-transaction: it took the agent's lease, opened a fenced block
    (SELECT … FOR UPDATE on the attention row) and stopped there. Its lease runs out;
    the transaction stays open until ``thaw``."""

    def __init__(self, agent_id: str, lease_seconds: float = 0.2) -> None:
        self.agent_id, self.lease_seconds = agent_id, lease_seconds
        self.locked = threading.Event()
        self._thaw = threading.Event()
        self.lease: Lease | None = None
        self._thread = threading.Thread(target=self._run, name="frozen-holder", daemon=True)

    def start(self) -> Lease:
        self._thread.start()
        assert self.locked.wait(10), "the holder never locked the row"
        assert self.lease is not None
        time.sleep(self.lease_seconds + 0.1)  # the lease has expired; the lock is still held
        return self.lease

    def thaw(self) -> None:
        self._thaw.set()
        self._thread.join(15)

    def _run(self) -> None:
        try:
            # The agent may still be on a worker (a kick of the run before): wait for it.
            deadline = time.monotonic() + 10
            while self.lease is None and time.monotonic() < deadline:
                self.lease = lease_take(self.agent_id, seconds=self.lease_seconds)
                time.sleep(0.01)
            assert self.lease is not None
            with fenced(self.lease):
                self.locked.set()
                self._thaw.wait(120)
        finally:
            connection.close()


def _run_in_thread(agent_id: str, timeout: float) -> tuple[str, float]:
    """run_attention(agent) in its own thread: its status (or 'hung') and how long it took."""
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["status"] = loop.run_attention(agent_id).status
        except Exception as exc:
            out["status"] = f"raised {exc.__class__.__name__}: {exc}"
        finally:
            connection.close()

    start = time.monotonic()
    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout)
    return out.get("status", "hung"), time.monotonic() - start


def _settle_down() -> None:
    """Before the worker stops and the database is flushed: no agent runs any more, the
    kicks still queued are gone, and a run that began before the pause has ended."""
    from markus.agents.models import Agent
    from markus.celery import app

    Agent.objects.update(status=Agent.RunStatus.PAUSED)
    app.control.purge()
    time.sleep(0.5)
    wait_for(
        lambda: not AgentAttention.objects.exclude(lease_owner="").filter(lease_expires_at__gt=timezone.now()).exists(),
        timeout=30,
        message="no live lease",
    )


@pytest.mark.postgres
@pytest.mark.slow
def test_a_worker_frozen_inside_a_transaction_stalls_only_its_own_agent(celery_worker, scripted, agent, alice, team):
    _needs("postgresql")
    scripted(default=Turn(text="ok"))
    others = [
        agent_create(name=f"Other {i}", role="engineer", owner=alice, team=team, agent_id=f"other{i}")[0].id
        for i in range(OTHERS)
    ]
    # Control: the same load and the same kicks, nobody frozen.
    done_c, total_c, control_s = _batch(others, "control", agent.id, bound=60)
    assert done_c == total_c, f"the control run itself did not finish: {done_c}/{total_c}"

    holder = _FrozenHolder(agent.id)
    try:
        frozen = holder.start()
        _enqueue(agent.id, "frozen-agent", 2)  # the frozen agent has due work: it gets woken
        bound = max(10.0, 3 * control_s)
        done, total, took = _batch(others, "frozen", agent.id, bound=bound)
        a_status, a_seconds = _run_in_thread(agent.id, timeout=10)
        row = AgentAttention.objects.get(agent=agent)
    finally:
        holder.thaw()
        _settle_down()
    print(
        f"\nother agents' progress during a frozen holder: {done}/{total} in {took:.1f} s "
        f"(control {done_c}/{total_c} in {control_s:.1f} s); "
        f"the frozen agent's own run: {a_status} in {a_seconds:.2f} s"
    )
    assert done >= 0.9 * total, f"a frozen worker stalled the fleet: {done}/{total} within {bound:.1f} s"
    assert a_status == "busy" and a_seconds < 5, (a_status, a_seconds)
    # Nobody took the agent behind the frozen holder's back: the lock made it busy.
    assert (row.lease_epoch, row.lease_owner) == (frozen.epoch, frozen.owner)


@pytest.mark.postgres
def test_postgres_sessions_carry_statement_and_idle_in_transaction_timeouts(transactional_db):
    _needs("postgresql")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')"
        )
        statement, idle = cursor.fetchone()
    assert statement not in ("0", "0ms") and idle not in ("0", "0ms"), (statement, idle)
    assert settings.DATABASES["default"]["OPTIONS"]["options"].count("-c ") >= 2


def _set_idle_timeout(ms: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, false)", [f"{ms}ms"])


@pytest.mark.postgres
def test_an_idle_transaction_is_cut_and_its_holder_cannot_write_afterwards(transactional_db, agent):
    _needs("postgresql")
    out: dict[str, Any] = {}
    locked = threading.Event()

    def holder() -> None:
        try:
            _set_idle_timeout(200)
            lease = lease_take(agent.id, seconds=0.3)
            assert lease is not None
            out["lease"] = lease
            with fenced(lease):
                locked.set()
                time.sleep(1.0)  # frozen: the server cuts the idle transaction meanwhile
                AgentAttention.objects.filter(agent_id=agent.id).update(state="focused")
            out["wrote"] = True
        except DBError as exc:  # the server cut the session (which class depends on the driver)
            out["error"] = exc
        finally:
            connection.close()

    t = threading.Thread(target=holder)
    t.start()
    assert locked.wait(10)
    wait_for(lambda: lease_take(agent.id) is not None, timeout=5, message="the cut holder's row free again")
    t.join(10)
    assert "wrote" not in out and isinstance(out.get("error"), DBError), out
    row = AgentAttention.objects.get(agent=agent)
    assert row.state != "focused" and row.lease_epoch == out["lease"].epoch + 1


@pytest.mark.postgres
@pytest.mark.parametrize("freeze_in", ["add_usage", "end_activity"])
def test_a_loop_frozen_in_a_fenced_transaction_that_gets_cut_ends_as_a_lost_lease(
    transactional_db, scripted, agent, monkeypatch, freeze_in
):
    """The real loop freezes inside a fenced transaction: after an LLM turn (in the tool
    loop, ``add_usage``) or while settling the item (``end_activity``). The server cuts
    the idle transaction, a successor takes over; the frozen run wakes up, fails on its
    dead session and ends as 'stale' (its thread survives); the cut transaction's writes
    never land and nothing later from its epoch either."""
    _needs("postgresql")
    monkeypatch.setitem(settings.MARKUS, "LEASE_SECONDS", 0.5)
    # A turn's usage is written with what follows it: the tool round after a turn that
    # calls a tool (add_usage), the item's outcome after the final turn (end_activity).
    first_turns = [Turn(tool_calls=[("check_mailbox", {})])] if freeze_in == "add_usage" else []
    scripted(*first_turns, default=Turn(text="ok"))
    frozen = threading.Event()
    original = getattr(records, freeze_in)

    def write_then_freeze(lease: Lease, activity: AgentActivity, **kw: Any) -> None:
        original(lease, activity, **kw)
        if threading.current_thread().name == "frozen-loop" and not frozen.is_set():
            frozen.set()
            time.sleep(2.0)  # SIGSTOP inside the open fenced transaction

    monkeypatch.setattr(records, freeze_in, write_then_freeze)
    first = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "A", "content": "a"})
    out: dict[str, Any] = {}

    def frozen_loop() -> None:
        try:
            _set_idle_timeout(200)
            out["status"] = loop.run_attention(agent.id).status
        except BaseException as exc:
            out["raised"] = exc
        finally:
            connection.close()

    t = threading.Thread(target=frozen_loop, name="frozen-loop")
    t.start()
    assert frozen.wait(10)
    time.sleep(0.8)  # past the lease and past the idle-in-transaction timeout
    second = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "B", "content": "b"})
    status, took = _run_in_thread(agent.id, timeout=20)
    assert status == "done" and took < 10, (status, took)
    t.join(15)
    assert not t.is_alive()
    assert out.get("status") == "stale", out
    assert MailboxItem.objects.get(id=second.id).status == Status.COMPLETED
    assert MailboxItem.objects.get(id=first.id).status not in UNSETTLED
    stale_epoch = AgentDecision.objects.get(mailbox_item_id=first.id, decision_type="pick").lease_epoch
    stale = AgentActivity.objects.get(mailbox_item_id=first.id, lease_epoch=stale_epoch)
    # The cut transaction's writes never landed.
    if freeze_in == "add_usage":
        assert stale.total_tokens == 0
    else:
        assert stale.success is not True
        assert not AgentActivityLog.objects.filter(activity=stale, content__startswith="completed").exists()
    assert not AgentDecision.objects.filter(lease_epoch=stale_epoch).exclude(decision_type="pick").exists()
    assert_single_focus(agent.id)


class _WatchingProvider(ScriptedProvider):
    """Records, at every provider call, whether a database transaction was open."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.in_transaction: list[tuple[str, bool]] = []

    def _note(self, what: str) -> None:
        self.in_transaction.append((what, connection.in_atomic_block))

    def complete(self, **kw: Any) -> LLMResponse:
        self._note("complete")
        return super().complete(**kw)

    def judge(self, **kw: Any) -> str:
        self._note("judge")
        return super().judge(**kw)

    def triage(self, **kw: Any) -> dict[str, Any]:
        self._note("triage")
        return super().triage(**kw)


@pytest.mark.pg
def test_no_transaction_is_open_during_a_provider_call(transactional_db, agent):
    """Every provider call of the loop (triage, a turn, the interrupt judge) runs with
    no database transaction open, so a slow or hung provider holds no lock."""
    first = Turn(tool_calls=[("check_mailbox", {})], delay=0.3)
    provider = _WatchingProvider(
        [first], default=Turn(text="ok"), judge_word="continue", triage_answer={"reasoning": "fine"}
    )

    def arrive() -> None:  # a less urgent item arrives mid-turn: the yield point asks the judge
        try:
            if first.started.wait(10):
                _enqueue(agent.id, "arrival", 1, kind=T.SESSION_REPLY, priority=4)
        finally:
            connection.close()

    set_provider_override(provider)
    try:
        _enqueue(agent.id, "equal", 3, kind=T.SESSION_REPLY, priority=2)  # equal priorities: triage runs
        arrival = threading.Thread(target=arrive)
        arrival.start()
        assert loop.run_attention(agent.id).status == "done"
        arrival.join(10)
        loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    assert not MailboxItem.objects.filter(agent=agent, status__in=UNSETTLED).exists()
    kinds = {what for what, _ in provider.in_transaction}
    assert {"complete", "judge", "triage"} <= kinds, provider.in_transaction
    assert not any(open_ for _, open_ in provider.in_transaction), provider.in_transaction


def test_on_sqlite_a_held_writer_makes_the_lease_path_answer_busy_after_the_busy_timeout(transactional_db, agent):
    """SQLite has one writer: a frozen thread holding an IMMEDIATE transaction stalls
    every writer (every agent) for up to the busy timeout. The lease path answers busy
    then instead of raising, and the agent runs once the writer lets go."""
    _needs("sqlite")
    AgentAttention.objects.get_or_create(agent_id=agent.id)
    _enqueue(agent.id, "sqlite", 1)
    frozen = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, timeout=5)
    try:
        frozen.execute("BEGIN IMMEDIATE")
        frozen.execute(f"UPDATE {AgentAttention._meta.db_table} SET updated_at = updated_at")
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout = 300")
        start = time.monotonic()
        status = loop.run_attention(agent.id).status
        took = time.monotonic() - start
    finally:
        frozen.execute("ROLLBACK")
        frozen.close()
        connection.close()  # the next connection has the configured busy timeout again
    assert status == "busy" and took < 3, (status, took)
    assert loop.run_attention(agent.id).status == "done"
    assert not MailboxItem.objects.filter(agent=agent, status__in=UNSETTLED).exists()
