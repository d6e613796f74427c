"""Liveness as a property (ARCHITECTURE decisions 2, 9, 10): a hypothesis state machine
drives random sequences of tasks, human comments and review answers, agent runs of the
attention loop (whose brain sometimes forgets to give a verdict, or dies mid-item),
worker crashes with a claimed item, restarts, sweeps and elapsing back-offs. After every
step, once the system has had its chance to react (a beat of the sweep, the recovery the
next worker does, another beat), every waiting task has a waker, nothing is processing
without a live lease, no task has two open executions for one round, no agent two
queued heartbeats, and no item is lost.

The loop is called as a plain function (no Celery); the sweep's wake-ups are recorded,
not sent."""

from __future__ import annotations

import os
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from attention import heartbeat, services
from attention.lease import lease_release, lease_take
from attention.loop import run_attention
from attention.models import AgentAttention
from mailbox import lifecycle
from mailbox.lifecycle import OPEN_STATUSES, not_parked
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_recover
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.llm.base import LLMResponse, ToolCall, Usage, set_provider_override
from markus.llm.offline import OfflineProvider, _called
from markus.work import liveness
from markus.work.liveness import waiting_without_waker
from markus.work.models import Task, TaskState
from markus.work.services import task_comment_create, task_create, task_retry, task_transition
from notifications.models import Approval, UserNotification
from notifications.services import approval_respond

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg, pytest.mark.slow]

AGENTS = [("sm-ada", "Ada"), ("sm-bea", "Bea"), ("sm-cy", "Cy")]
AGENT_IDS = [a for a, _ in AGENTS]
ALL_STATUSES = {s.value for s in Status}
COMMENTS = ["Please also cover the edge cases.", "How is it going?", "Looks promising, carry on.", "Remember the docs."]

# Figures of the whole run, printed at the end.
STATS: Counter = Counter()


class WorkerDied(BaseException):
    """The process running the loop vanished mid-item (not an Exception: nothing in the
    loop may catch it as a provider failure)."""


class Brain(OfflineProvider):
    """The offline brain, with a mood the machine sets before each run: an execution
    may work or forget its verdict (with a final answer, or an empty one); a review may
    approve, send the task back or forget; and the worker may die at the N-th call."""

    name = "state-machine"

    def __init__(self):
        self.execution = "work"
        self.review = "approve"
        self.die_at: int | None = None
        self.interrupt: str | None = None
        self.calls = 0

    def complete(self, *, system, messages, tools, context):
        self.calls += 1
        if self.interrupt is not None:
            action, self.interrupt = self.interrupt, None
            human_interrupts(action, (context.item or {}).get("taskId"))
        if self.die_at is not None and self.calls >= self.die_at:
            self.die_at = None
            raise WorkerDied(f"worker died in call {self.calls} ({context.scenario})")
        item = context.item or {}
        mood = {"task_execution": self.execution, "review": self.review}.get(context.scenario)
        if mood == "forget":
            return LLMResponse(text="I think this is handled.", usage=Usage(10, 5))
        if mood == "garble":  # an empty answer: a failed attempt, retried
            return LLMResponse(text="", usage=Usage(10, 5))
        if mood == "send_back" and item.get("taskId"):
            if "task_update" not in _called(messages):
                return LLMResponse(
                    tool_calls=[
                        ToolCall(
                            id=f"sb_{len(messages)}",
                            name="task_update",
                            arguments={
                                "task_id": item["taskId"],
                                "status": "in_progress",
                                "note": "Needs another pass.",
                            },
                        )
                    ],
                    usage=Usage(10, 5),
                )
            return LLMResponse(text="Sent back for another pass.", usage=Usage(10, 5))
        return super().complete(system=system, messages=messages, tools=tools, context=context)


BRAIN = Brain()
WORLD: dict = {}


def reset_world() -> None:
    """A fresh world for every example: the agents (and with them their mailboxes,
    attention rows, decisions, activities and sessions), the tasks and the approvals."""
    Task.objects.all().delete()
    Approval.objects.all().delete()
    UserNotification.objects.all().delete()
    Agent.objects.filter(id__in=AGENT_IDS).delete()
    for agent_id, name in AGENTS:
        agent_create(name=name, role="engineer", owner=WORLD["alice"], team=WORLD["team"], agent_id=agent_id)


def human_interrupts(action: str, task_id: str | None) -> None:
    """While the LLM thinks, a person acts: comments on the task being worked on (or
    another one), cancels it, or answers a pending review."""
    alice = Actor.for_user(WORLD["alice"])
    task = Task.objects.filter(id=task_id).first() if task_id else None
    task = task or Task.objects.order_by("-created_at", "-id").first()
    if task is None:
        return
    STATS[f"mid-item human {action}"] += 1
    if action == "comment":
        task_comment_create(task_id=task.id, actor=alice, content="Quick note while you work: keep it small.")
    elif action == "cancel" and task.status in (TaskState.IN_PROGRESS, TaskState.REVIEW):
        task_transition(task_id=task.id, to_status=TaskState.CANCELLED, actor=alice, note="changed my mind")
    elif action == "answer":
        approval = Approval.objects.filter(status=Approval.State.PENDING).order_by("created_at", "id").first()
        if approval is not None:
            approval_respond(
                user=approval.user,
                approval_id=approval.id,
                selected_option="request_changes",
                comment="Another pass, please.",
            )


def live_lease(agent_id: str) -> bool:
    return (
        AgentAttention.objects.filter(agent_id=agent_id, lease_expires_at__gt=timezone.now())
        .exclude(lease_owner="")
        .exists()
    )


def expire_lease(agent_id: str) -> None:
    AgentAttention.objects.filter(agent_id=agent_id).update(lease_expires_at=timezone.now() - timedelta(seconds=5))


def describe(item: MailboxItem) -> str:
    return (
        f"{item.id} {item.source_type} {item.status} task={item.task_id} extra={item.extra} "
        f"attempts={item.attempts} drop={item.drop_reason!r}"
    )


class LivenessMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        reset_world()
        STATS["examples"] += 1
        self.n = 0

    # ------------------------------------------------------------------------ helpers

    def _tasks(self, *statuses: str) -> list[Task]:
        rows = Task.objects.order_by("created_at", "id")
        return list(rows.filter(status__in=statuses) if statuses else rows)

    def _step(self, name: str) -> None:
        WORLD["last"] = name
        STATS["steps"] += 1
        STATS[f"rule:{name}"] += 1

    # ------------------------------------------------------------------------ people

    @precondition(lambda self: Task.objects.filter(status__in=[TaskState.IN_PROGRESS, TaskState.REVIEW]).count() < 6)
    @rule(assignee=st.integers(0, 2), offset=st.integers(1, 2), reviewer=st.sampled_from(["agent", "alice", "bob"]))
    def create_task(self, assignee, offset, reviewer):
        self._step("create_task")
        self.n += 1
        kw = {}
        if reviewer == "agent":
            kw["reviewer_agent_id"] = AGENT_IDS[(assignee + offset) % 3]
        else:
            kw["reviewer_user_id"] = WORLD[reviewer].pk
        task_create(
            actor=Actor.for_user(WORLD["alice"]),
            title=f"Task {self.n}",
            description="Do the thing.",
            assignee_id=AGENT_IDS[assignee],
            **kw,
        )

    @precondition(lambda self: Task.objects.exists())
    @rule(pick=st.integers(0, 50), text=st.sampled_from(COMMENTS), mention=st.booleans())
    def human_comments(self, pick, text, mention):
        self._step("human_comments")
        tasks = self._tasks()
        task = tasks[pick % len(tasks)]
        if mention and task.reviewer_agent_id:
            text = f"@{Agent.objects.get(id=task.reviewer_agent_id).name} {text}"
        task_comment_create(task_id=task.id, actor=Actor.for_user(WORLD["alice"]), content=text)

    @precondition(lambda self: Approval.objects.filter(status=Approval.State.PENDING).exists())
    @rule(pick=st.integers(0, 50), answer=st.sampled_from(["approve", "request_changes"]), comment=st.booleans())
    def human_answers_review(self, pick, answer, comment):
        self._step("human_answers_review")
        pending = list(Approval.objects.filter(status=Approval.State.PENDING).order_by("created_at", "id"))
        approval = pending[pick % len(pending)]
        approval_respond(
            user=approval.user,
            approval_id=approval.id,
            selected_option=answer,
            comment="Please tighten the error handling." if comment else "",
        )
        STATS[f"human:{answer}"] += 1

    @precondition(lambda self: Task.objects.filter(status__in=[TaskState.FAILED, TaskState.CANCELLED]).exists())
    @rule(pick=st.integers(0, 50))
    def human_retries(self, pick):
        """A person retries a failed or cancelled task (a new execution round)."""
        self._step("human_retries")
        tasks = self._tasks(TaskState.FAILED, TaskState.CANCELLED)
        task_retry(task_id=tasks[pick % len(tasks)].id, actor=Actor.for_user(WORLD["alice"]), note="try again")

    @precondition(lambda self: Task.objects.filter(status__in=[TaskState.IN_PROGRESS, TaskState.REVIEW]).exists())
    @rule(pick=st.integers(0, 50), really=st.integers(0, 2))
    def human_cancels(self, pick, really):
        """A person cancels a running task (one time in three; else changes their mind)."""
        self._step("human_cancels")
        if really:
            return
        tasks = self._tasks(TaskState.IN_PROGRESS, TaskState.REVIEW)
        task_transition(
            task_id=tasks[pick % len(tasks)].id,
            to_status=TaskState.CANCELLED,
            actor=Actor.for_user(WORLD["alice"]),
            note="not needed",
        )

    # ------------------------------------------------------------------------ agents

    @precondition(
        lambda self: MailboxItem.objects.filter(
            agent_id__in=AGENT_IDS, status__in=[Status.QUEUED, Status.DEFERRED]
        ).exists()
    )
    @rule(
        agent=st.integers(0, 2),
        budget=st.integers(1, 4),
        later=st.booleans(),
        runs=st.integers(1, 3),
        execution=st.sampled_from(["work", "work", "forget", "garble"]),
        review=st.sampled_from(["approve", "approve", "send_back", "forget"]),
        die_at=st.one_of(st.none(), st.none(), st.integers(1, 4)),
        interrupt=st.sampled_from([None, None, "comment", "cancel", "answer"]),
    )
    def agent_runs(self, agent, budget, later, runs, execution, review, die_at, interrupt):
        """Workers run the loop ``runs`` times in a row, each for an agent with due
        work if there is one (``later``: after the back-offs elapsed), the brain in the
        given mood, maybe dying at its N-th LLM call, maybe with a person acting during
        the first call."""
        self._step("agent_runs")
        if later:
            self.time_passes()
        BRAIN.die_at, BRAIN.interrupt = die_at, interrupt
        for run in range(runs):
            if self._run_once(agent + run, budget, execution, review) == "died":
                break

    def _run_once(self, agent: int, budget: int, execution: str, review: str) -> str:
        due = sorted(
            set(
                MailboxItem.objects.filter(agent_id__in=AGENT_IDS)
                .filter(Q(status=Status.QUEUED) | Q(status=Status.DEFERRED, deferred_until__lte=timezone.now()))
                .filter(not_parked())
                .values_list("agent_id", flat=True)
            )
        )
        agent_id = due[agent % len(due)] if due else AGENT_IDS[agent % len(AGENT_IDS)]
        BRAIN.execution, BRAIN.review, BRAIN.calls = execution, review, 0
        try:
            result = run_attention(agent_id, budget=budget)
        except WorkerDied:
            # The loop's finally released the lease; the item it held stays processing.
            STATS["crashes"] += 1
            STATS["crashes mid-LLM"] += 1
            WORLD["last"] = "agent_runs (worker died)"
            return "died"
        finally:
            BRAIN.die_at = BRAIN.interrupt = None
        STATS[f"run:{result.status}"] += 1
        STATS["items processed"] += result.processed
        return result.status

    @precondition(lambda self: MailboxItem.objects.filter(agent_id__in=AGENT_IDS, status=Status.QUEUED).exists())
    @rule(agent=st.integers(0, 2), then=st.sampled_from(["nothing", "sweep", "comment", "answer"]))
    def worker_crashes_holding_an_item(self, agent, then):
        """A worker took the lease, claimed the head of the queue and died: its lease
        runs out with the item still processing. Before the next worker comes, maybe a
        sweep runs, a person comments or answers a review."""
        self._step("worker_crashes")
        agent_id = AGENT_IDS[agent]
        if not MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED).exists():
            agent_id = (
                MailboxItem.objects.filter(agent_id__in=AGENT_IDS, status=Status.QUEUED)
                .values_list("agent_id", flat=True)
                .order_by("agent_id")
                .first()
            )
        lease = lease_take(agent_id, seconds=30)
        assert lease is not None, f"{agent_id}: a live lease between steps"
        claimed = lifecycle.claim_next(agent_id=agent_id, epoch=lease.epoch)
        expire_lease(agent_id)
        if claimed is None:
            return
        STATS["crashes"] += 1
        STATS[f"crashed on {claimed.source_type}"] += 1
        if then == "sweep":
            services.sweep()
        elif then == "comment" and claimed.task_id:
            task_comment_create(
                task_id=claimed.task_id, actor=Actor.for_user(WORLD["alice"]), content="Any news on this?"
            )
        elif then == "answer":
            approval = Approval.objects.filter(status=Approval.State.PENDING).order_by("created_at", "id").first()
            if approval is not None:
                approval_respond(
                    user=approval.user,
                    approval_id=approval.id,
                    selected_option="request_changes",
                    comment="One more thing.",
                )

    @rule(what=st.sampled_from(["restart", "restart_claiming", "heartbeat", "sweep", "time_passes"]))
    def background(self, what):
        """Things that happen around the agents: every worker dies at once (a deploy,
        a host reboot; with the head of each queue claimed or not), the heartbeat beat,
        a sweep, the back-offs elapse."""
        self._step(what)
        if what.startswith("restart"):
            for agent_id in AGENT_IDS:
                if what == "restart_claiming":
                    lease = lease_take(agent_id, seconds=30)
                    if lease is not None and lifecycle.claim_next(agent_id=agent_id, epoch=lease.epoch) is not None:
                        STATS["crashes"] += 1
                        STATS["crashes at restart"] += 1
                expire_lease(agent_id)
        elif what == "heartbeat":
            heartbeat.heartbeat_tick()
        elif what == "sweep":
            services.sweep()
        else:
            self.time_passes()

    def time_passes(self):
        """The back-offs elapse: every deferred item with a due time is due now."""
        for item in MailboxItem.objects.filter(
            agent_id__in=AGENT_IDS, status=Status.DEFERRED, deferred_until__isnull=False
        ):
            if not item.marks.get("waitingForApproval"):
                MailboxItem.objects.filter(id=item.id).update(deferred_until=timezone.now() - timedelta(seconds=1))

    # ------------------------------------------------------------------------ the invariant

    def react(self) -> None:
        """What the system does before anyone would notice: a beat of the sweep, the
        recovery the next worker of an agent whose worker died does when it takes the
        lease, and the next beat."""
        services.sweep()
        for agent_id in AGENT_IDS:
            if live_lease(agent_id):
                continue
            if MailboxItem.objects.filter(agent_id=agent_id, status=Status.PROCESSING).exists():
                lease = lease_take(agent_id)
                assert lease is not None
                report = mailbox_recover(agent_id)
                lease_release(lease)
                STATS["recoveries"] += 1
                STATS["recovered: requeued"] += len(report.requeued)
                STATS["recovered: dropped"] += len(report.dropped)
        services.sweep()

    @invariant()
    def every_waiting_task_has_a_waker(self):
        self.react()
        now = timezone.now()
        tasks = Task.objects.filter(status__in=[TaskState.IN_PROGRESS, TaskState.REVIEW])
        problems = [f"{t.id} ({t.title}): {reason}" for t in tasks if (reason := waiting_without_waker(t))]
        assert not problems, "waiting without a waker:\n" + "\n".join(problems) + "\n" + self.dump()

        # 2. nothing processing without a live lease of its agent
        live = set(
            AgentAttention.objects.filter(lease_expires_at__gt=now)
            .exclude(lease_owner="")
            .values_list("agent_id", flat=True)
        )
        orphans = MailboxItem.objects.filter(status=Status.PROCESSING).exclude(agent_id__in=live)
        assert not orphans.exists(), "processing without a live lease:\n" + "\n".join(map(describe, orphans))

        # 3. one open execution per task and round, one review request per task and
        #    round, at most one queued heartbeat per agent
        executions = Counter(
            (i.task_id, i.extra.get("executionRound"))
            for i in MailboxItem.objects.filter(source_type=T.TASK_STATUS_UPDATE, status__in=list(OPEN_STATUSES))
            if i.triggers_execution
        )
        twice = {k: n for k, n in executions.items() if n > 1}
        assert not twice, f"two open executions for one task and round: {twice}\n{self.dump()}"
        reviews = Counter(
            (i.task_id, i.extra.get("reviewRound"))
            for i in MailboxItem.objects.filter(source_type=T.REVIEW_REQUEST, status__in=list(OPEN_STATUSES))
        )
        twice = {k: n for k, n in reviews.items() if n > 1}
        assert not twice, f"two open review requests for one task and round: {twice}\n{self.dump()}"
        heartbeats = Counter(
            MailboxItem.objects.filter(source_type=T.HEARTBEAT, status=Status.QUEUED).values_list("agent_id", flat=True)
        )
        assert all(n <= 1 for n in heartbeats.values()), f"two queued heartbeats: {heartbeats}"

        # 4. no item lost: a known status, and a reason for every drop
        statuses = set(MailboxItem.objects.values_list("status", flat=True).distinct())
        assert statuses <= ALL_STATUSES, statuses
        silent = MailboxItem.objects.filter(status=Status.DROPPED, drop_reason="")
        assert not silent.exists(), "dropped without a reason:\n" + "\n".join(map(describe, silent))

    def dump(self) -> str:
        lines = ["tasks:"]
        for t in self._tasks():
            lines.append(
                f"  {t.id} {t.title} {t.status} round={t.execution_round} assignee={t.assignee_id} "
                f"reviewer={t.reviewer_agent_id or t.reviewer_user_id} meta={t.metadata}"
            )
        lines.append("items:")
        for i in MailboxItem.objects.filter(agent_id__in=AGENT_IDS).order_by("queued_at", "id"):
            lines.append("  " + describe(i))
        return "\n".join(lines)

    def teardown(self):
        for status in Task.objects.values_list("status", flat=True):
            STATS[f"task ended {status}"] += 1


def counting(real, key: str):
    def counted(task_id, *, reason):
        STATS[key] += 1
        return real(task_id, reason=reason)

    return counted


@pytest.mark.timeout(900)  # a failure is shrunk (hypothesis gives that up to 5 minutes) before it is reported
def test_every_waiting_task_keeps_a_waker_through_random_runs_crashes_and_restarts(
    transactional_db, monkeypatch, django_user_model, capsys
):
    alice = django_user_model.objects.create_user("alice", password="pw-alice")
    bob = django_user_model.objects.create_user("bob", password="pw-bob")
    team = Team.objects.create(name="Core", owner=alice)
    team.members.add(bob)
    WORLD.update(alice=alice, bob=bob, team=team)

    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", False)
    monkeypatch.setitem(settings.MARKUS, "COALESCE_WINDOW_MS", 0)
    monkeypatch.setitem(settings.MARKUS, "EXECUTION_MAX_RETRIES", 2)
    kicked: list[str] = []
    monkeypatch.setattr(services, "wake", lambda agent_id, **kw: kicked.append(agent_id))
    repair = services.work_liveness_repair

    def counted_repair():
        for task in Task.objects.filter(status__in=[TaskState.IN_PROGRESS, TaskState.REVIEW]):
            reason = waiting_without_waker(task)
            if reason:
                STATS[f"repair after {WORLD.get('last')}: {reason.split(' (')[0]}"] += 1
        report = repair()
        STATS["repairs"] += len(report.restored)
        STATS["repairs: failed"] += len(report.failed)
        STATS["repairs: escalated"] += len(report.escalated)
        return report

    monkeypatch.setattr(services, "work_liveness_repair", counted_repair)
    for name, key in [
        ("execution_gave_up", "gave up: execution (task failed)"),
        ("review_gave_up", "gave up: review (went to a person)"),
    ]:
        monkeypatch.setattr(liveness, name, counting(getattr(liveness, name), key))
    STATS.clear()
    set_provider_override(BRAIN)
    started = time.monotonic()
    try:
        run_state_machine_as_test(
            LivenessMachine,
            settings=hsettings(
                max_examples=int(os.environ.get("LIVENESS_SM_EXAMPLES", 20)),
                stateful_step_count=int(os.environ.get("LIVENESS_SM_STEPS", 35)),
                deadline=None,
                database=None,
                print_blob=True,
                suppress_health_check=[
                    HealthCheck.too_slow,
                    HealthCheck.function_scoped_fixture,
                    HealthCheck.filter_too_much,
                    HealthCheck.data_too_large,
                ],
            ),
        )
    finally:
        set_provider_override(None)
        WORLD.clear()
    elapsed = time.monotonic() - started
    with capsys.disabled():  # the figures belong in the run's output, also in CI
        print(
            f"\nliveness state machine: {STATS['steps']} steps, {STATS['crashes']} crashes, "
            f"{STATS['repairs']} repairs, {STATS['examples']} examples, {elapsed:.1f} s "
            f"({settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]})"
        )
        for key in sorted(k for k in STATS if k not in ("steps", "crashes", "repairs", "examples")):
            print(f"  {key}: {STATS[key]}")
    assert STATS["steps"] > 50 and STATS["crashes"] > 0 and STATS["items processed"] > 0
