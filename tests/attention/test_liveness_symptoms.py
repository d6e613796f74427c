"""Issue 9 through the attention loop, called as a plain function with the scripted brain:
a review request is not swallowed by a human's comment, work in flight at a crash is
re-queued, every waiting task has a waker the sweep restores, an execution without a
verdict is retried and finally failed, a blank chat answer is no reply, the judge's
defer sends an item behind its peers, and the submit note reaches the reviewer."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from attention import journal, services
from attention.lease import lease_take
from attention.loop import run_attention
from attention.models import AgentActivity, AgentAttention, AgentDecision
from attention.processing import chat_reply_for
from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage, Team
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.llm.scripted import Turn
from markus.work.liveness import work_liveness_repair
from markus.work.models import Task
from markus.work.services import task_comment_create, task_create, task_transition
from notifications.models import Approval

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]

OPEN = [Status.QUEUED, Status.PROCESSING, Status.DEFERRED]
HUMAN_CHAT_META = {"senderId": "1", "senderName": "alice", "senderRole": "user"}


@pytest.fixture(autouse=True)
def no_wake_on_enqueue(monkeypatch):
    """run_attention is called by hand; no Celery message is sent on enqueue."""
    monkeypatch.setitem(settings.MARKUS, "WAKE_ON_ENQUEUE", False)


@pytest.fixture
def no_kick(monkeypatch):
    """The sweep's wake-ups are recorded instead of sent to the broker."""
    kicked: list[str] = []
    monkeypatch.setattr(services, "wake", lambda agent_id, **kw: kicked.append(agent_id))
    return kicked


@pytest.fixture
def bea(alice, team):
    b, _ = agent_create(name="Bea", role="engineer", owner=alice, team=team, agent_id="bea")
    return b


@pytest.fixture
def human(alice):
    return Actor.for_user(alice)


def status(item_id: str) -> str:
    return MailboxItem.objects.get(id=item_id).status


def executions(agent_id: str, task_id: str):
    return MailboxItem.objects.filter(
        agent_id=agent_id,
        source_type=T.TASK_STATUS_UPDATE,
        payload__taskId=task_id,
        payload__extra__triggerExecution=True,
    )


def review_requests(agent_id: str, task_id: str):
    return MailboxItem.objects.filter(agent_id=agent_id, source_type=T.REVIEW_REQUEST, payload__taskId=task_id)


def scenarios_for(provider, item_id: str) -> list[str]:
    return [c["scenario"] for c in provider.calls if (c["item"] or {}).get("id") == item_id]


def first_call_order(provider) -> list[str]:
    order: list[str] = []
    for call in provider.calls:
        item_id = (call["item"] or {}).get("id")
        if item_id and item_id not in order:
            order.append(item_id)
    return order


def make_due(agent_id: str) -> None:
    """Deferred items (not parked for an approval) come due now."""
    for item in MailboxItem.objects.filter(agent_id=agent_id, status=Status.DEFERRED):
        if not item.marks.get("waitingForApproval"):
            MailboxItem.objects.filter(id=item.id).update(deferred_until=timezone.now())


def run_until_quiet(agent_id: str, rounds: int = 4) -> None:
    for _ in range(rounds):
        run_attention(agent_id)
        make_due(agent_id)


def die_holding(agent_id: str) -> MailboxItem:
    """A worker took the lease, claimed the head of the queue, and died: its lease ran out."""
    dead = lease_take(agent_id)
    assert dead is not None
    claimed = lifecycle.claim_next(agent_id=agent_id, epoch=dead.epoch)
    assert claimed is not None and claimed.status == Status.PROCESSING
    AgentAttention.objects.filter(agent_id=agent_id).update(lease_expires_at=timezone.now() - timedelta(seconds=5))
    return claimed


def seconds_until(item: MailboxItem, since) -> float:
    assert item.deferred_until is not None, f"{item.id} has no deferred_until"
    return (item.deferred_until - since).total_seconds()


# ---------------------------------------------------------------------------- symptom 1


def test_a_humans_comment_on_a_task_in_review_leaves_the_review_request_to_run_its_review(scripted, agent, bea, human):
    task = task_create(
        actor=human,
        title="Write the parser",
        assignee_id=bea.id,
        reviewer_agent_id=agent.id,
        metadata={"watchers": [agent.id]},
    )
    task_transition(task_id=task.id, to_status="review", actor=Actor.for_agent(bea), note="parser written")
    review = review_requests(agent.id, task.id).get()
    task_comment_create(task_id=task.id, actor=human, content="Please check the edge cases too")
    comment = MailboxItem.objects.get(agent=agent, source_type=T.TASK_COMMENT, payload__taskId=task.id)
    assert comment.is_user_interaction
    provider = scripted(
        Turn(text="noted"),  # the human's comment goes first (priority 0)
        Turn(tool_calls=[("task_update", {"task_id": task.id, "status": "completed"})]),
        Turn(text="reviewed"),
    )
    run_attention(agent.id)
    review.refresh_from_db()
    assert review.status == Status.COMPLETED and review.merged_into_id is None
    assert scenarios_for(provider, review.id) == ["review", "review"]
    assert Task.objects.get(id=task.id).status == "completed"
    comment.refresh_from_db()
    assert comment.status == Status.COMPLETED and comment.merged_into_id is None


def test_an_action_required_requirement_update_runs_its_own_scenario_beside_an_informational_one(scripted, agent):
    chat = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "hi", "content": "hi"},
        metadata=HUMAN_CHAT_META,
    )
    info = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.REQUIREMENT_UPDATE,
        payload={
            "summary": "Requirement in_progress",
            "content": "approved",
            "requirementId": "req_1",
            "extra": {"toStatus": "in_progress"},
        },
    )
    action = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.REQUIREMENT_UPDATE,
        payload={
            "summary": "All tasks settled",
            "content": "decide what is next",
            "requirementId": "req_1",
            "extra": {"toStatus": "in_progress", "actionRequired": True},
        },
    )
    provider = scripted(default=Turn(text="ok"))
    run_attention(agent.id)
    assert status(chat.id) == Status.COMPLETED and status(info.id) in (Status.COMPLETED, Status.MERGED)
    action.refresh_from_db()
    assert action.status == Status.COMPLETED and action.merged_into_id is None
    assert scenarios_for(provider, action.id) == ["requirement_action"]


# ---------------------------------------------------------------------------- symptom 2


def test_an_execution_in_flight_when_its_worker_died_is_requeued_and_the_task_submitted(scripted, agent, bea, human):
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_agent_id=bea.id)
    execution = executions(agent.id, task.id).get()
    assert die_holding(agent.id).id == execution.id
    provider = scripted(
        Turn(tool_calls=[("task_submit_review", {"task_id": task.id, "summary": "parser written"})]),
        Turn(text="submitted"),
    )
    run_attention(agent.id)
    execution.refresh_from_db()
    assert execution.status == Status.COMPLETED, execution.drop_reason
    assert scenarios_for(provider, execution.id) == ["task_execution", "task_execution"]
    assert Task.objects.get(id=task.id).status == "review"
    assert review_requests(bea.id, task.id).filter(status=Status.QUEUED).count() == 1


def test_a_retry_after_a_missed_verdict_is_not_counted_as_a_crash(scripted, agent, bea, human):
    """Found by the state machine: recovery counted every claim as a crash, so an
    execution that crashed once on its first retry was dropped ("2 times")."""
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_agent_id=bea.id)
    execution = executions(agent.id, task.id).get()
    scripted(Turn(text="forgot to submit"))
    run_attention(agent.id)  # no verdict: deferred for a retry
    execution.refresh_from_db()
    assert execution.status == Status.DEFERRED and execution.marks["executionRetries"] == 1
    make_due(agent.id)
    lease = lease_take(agent.id)
    assert lease is not None
    lifecycle.resurface_due(agent.id)
    assert die_holding_under(lease).id == execution.id  # the retry's worker dies: one crash
    scripted(
        Turn(tool_calls=[("task_submit_review", {"task_id": task.id, "summary": "parser"})]),
        Turn(text="submitted"),
    )
    run_attention(agent.id)
    execution.refresh_from_db()
    assert execution.status == Status.COMPLETED, execution.drop_reason
    assert execution.marks["crashes"] == 1
    assert Task.objects.get(id=task.id).status == "review"


def die_holding_under(lease) -> MailboxItem:
    claimed = lifecycle.claim_next(agent_id=lease.agent_id, epoch=lease.epoch)
    assert claimed is not None
    AgentAttention.objects.filter(agent_id=lease.agent_id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=5)
    )
    return claimed


def test_a_review_in_flight_when_its_worker_died_is_requeued_and_the_review_done(scripted, agent, bea, human):
    task = task_create(actor=human, title="Write the parser", assignee_id=bea.id, reviewer_agent_id=agent.id)
    task_transition(task_id=task.id, to_status="review", actor=Actor.for_agent(bea))
    review = review_requests(agent.id, task.id).get()
    assert die_holding(agent.id).id == review.id
    provider = scripted(
        Turn(tool_calls=[("task_update", {"task_id": task.id, "status": "completed", "note": "LGTM"})]),
        Turn(text="reviewed"),
    )
    run_attention(agent.id)
    review.refresh_from_db()
    assert review.status == Status.COMPLETED, review.drop_reason
    assert scenarios_for(provider, review.id) == ["review", "review"]
    assert Task.objects.get(id=task.id).status == "completed"


@pytest.mark.parametrize("lost", ["dropped", "deleted"])
def test_a_task_in_progress_without_a_live_execution_gets_exactly_one_back_from_the_sweep(
    agent, bea, human, no_kick, lost
):
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_agent_id=bea.id)
    execution = executions(agent.id, task.id).get()
    if lost == "dropped":
        assert lifecycle.drop(execution.id, reason="lost in a crash")
    else:
        MailboxItem.objects.filter(id=execution.id).delete()
    assert not executions(agent.id, task.id).filter(status__in=OPEN).exists()
    services.sweep()
    [repaired] = executions(agent.id, task.id).filter(status__in=OPEN)
    assert repaired.status == Status.QUEUED
    reason = repaired.marks.get("repairReason")
    assert isinstance(reason, str) and reason.strip()
    services.sweep()
    assert list(executions(agent.id, task.id).filter(status__in=OPEN).values_list("id", flat=True)) == [repaired.id]
    assert Task.objects.get(id=task.id).status == "in_progress"


def test_a_task_in_review_without_a_live_review_request_gets_exactly_one_back_from_the_sweep(
    agent, bea, human, no_kick
):
    task = task_create(actor=human, title="Write the parser", assignee_id=bea.id, reviewer_agent_id=agent.id)
    task_transition(task_id=task.id, to_status="review", actor=Actor.for_agent(bea))
    assert lifecycle.drop(review_requests(agent.id, task.id).get().id, reason="lost in a crash")
    services.sweep()
    [repaired] = review_requests(agent.id, task.id).filter(status__in=OPEN)
    assert repaired.status == Status.QUEUED
    reason = repaired.marks.get("repairReason")
    assert isinstance(reason, str) and reason.strip()
    services.sweep()
    assert list(review_requests(agent.id, task.id).filter(status__in=OPEN).values_list("id", flat=True)) == [
        repaired.id
    ]
    assert Task.objects.get(id=task.id).status == "review"


def test_the_repair_finds_healthy_tasks_in_a_fixed_number_of_queries(agent, bea, human, django_assert_max_num_queries):
    for i in range(12):
        task_create(actor=human, title=f"Task {i}", assignee_id=agent.id, reviewer_agent_id=bea.id)
    with django_assert_max_num_queries(4):
        assert not work_liveness_repair()


def test_a_task_in_review_by_a_human_with_a_pending_approval_needs_no_repair(agent, alice, human, no_kick):
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_user_id=alice.pk)
    task_transition(task_id=task.id, to_status="review", actor=Actor.for_agent(agent))
    assert Approval.objects.filter(status=Approval.State.PENDING).count() == 1
    items_before = set(MailboxItem.objects.values_list("id", flat=True))
    services.sweep()
    services.sweep()
    assert set(MailboxItem.objects.values_list("id", flat=True)) == items_before
    assert Approval.objects.filter(status=Approval.State.PENDING).count() == 1
    assert Task.objects.get(id=task.id).status == "review"


# ---------------------------------------------------------------------------- symptom 3


def test_an_execution_that_ends_without_submitting_is_retried_with_back_off(scripted, agent, bea, human):
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_agent_id=bea.id)
    execution = executions(agent.id, task.id).get()
    scripted(Turn(text="All done, I think"), Turn(text="Done again"))
    started = timezone.now()
    run_attention(agent.id)
    execution.refresh_from_db()
    assert execution.status == Status.DEFERRED
    assert 25 <= seconds_until(execution, started) <= 40
    assert execution.marks["executionRetries"] == 1
    assert Task.objects.get(id=task.id).status == "in_progress"
    [attempt] = AgentActivity.objects.filter(mailbox_item_id=execution.id)
    assert attempt.success is False and attempt.ended_at is not None
    make_due(agent.id)
    started = timezone.now()
    run_attention(agent.id)
    execution.refresh_from_db()
    assert execution.status == Status.DEFERRED
    assert 55 <= seconds_until(execution, started) <= 70
    assert execution.marks["executionRetries"] == 2
    assert [a.success for a in AgentActivity.objects.filter(mailbox_item_id=execution.id)] == [False, False]


def test_an_execution_whose_submission_fails_is_retried_not_forgotten(scripted, agent, human):
    # The agent filed the task for itself: it has no reviewer, so the submission is refused.
    # (Its team lets it start at once, without a person's approval of what it files.)
    Team.objects.filter(id=agent.team_id).update(agent_task_approval=False)
    task = task_create(actor=Actor.for_agent(agent), title="Write the parser", assignee_id=agent.id)
    execution = executions(agent.id, task.id).get()
    provider = scripted(
        Turn(tool_calls=[("task_submit_review", {"task_id": task.id, "summary": "parser written"})]),
        Turn(text="submitted"),
    )
    started = timezone.now()
    run_attention(agent.id)
    assert "no reviewer" in provider.calls[1]["messages"][-1]["content"]  # the brain saw the refusal
    execution.refresh_from_db()
    assert Task.objects.get(id=task.id).status == "in_progress"
    assert execution.status == Status.DEFERRED
    assert 25 <= seconds_until(execution, started) <= 40
    assert execution.marks["executionRetries"] == 1
    assert AgentActivity.objects.get(mailbox_item_id=execution.id).success is False


def test_an_execution_that_never_submits_fails_the_task_once_its_retries_are_spent(
    scripted, agent, bea, human, monkeypatch
):
    monkeypatch.setitem(settings.MARKUS, "EXECUTION_MAX_RETRIES", 1)
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_agent_id=bea.id)
    execution = executions(agent.id, task.id).get()
    provider = scripted(default=Turn(text="All done, I think"))
    run_attention(agent.id)
    execution.refresh_from_db()
    assert execution.status == Status.DEFERRED and execution.marks["executionRetries"] == 1
    assert Task.objects.get(id=task.id).status == "in_progress"
    make_due(agent.id)
    run_attention(agent.id)
    assert Task.objects.get(id=task.id).status == "failed"
    assert not executions(agent.id, task.id).filter(status__in=OPEN).exists()
    assert len(scenarios_for(provider, execution.id)) == 2


def test_a_retry_that_comes_due_after_its_task_left_in_progress_is_skipped(scripted, agent, bea, human):
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_agent_id=bea.id)
    execution = executions(agent.id, task.id).get()
    provider = scripted(default=Turn(text="All done, I think"))
    run_attention(agent.id)
    assert status(execution.id) == Status.DEFERRED
    # The cancel lands while the retry waits (a race: its deferred item was not dropped).
    Task.objects.filter(id=task.id).update(status="cancelled", cancel_requested_at=timezone.now())
    calls = len(provider.calls)
    make_due(agent.id)
    run_attention(agent.id)
    assert status(execution.id) in (Status.COMPLETED, Status.DROPPED)
    assert len(provider.calls) == calls
    assert Task.objects.get(id=task.id).status == "cancelled"


# ---------------------------------------------------------------------------- symptom 4


@pytest.mark.parametrize("blank", ["", "   \n\t "])
def test_a_blank_answer_to_a_human_chat_is_retried_and_the_next_answer_is_the_reply(scripted, agent, blank):
    chat = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "question", "content": "What is the status?"},
        metadata=HUMAN_CHAT_META,
    )
    provider = scripted(Turn(text=blank), Turn(text="The parser is in review."))
    run_until_quiet(agent.id)
    assert status(chat.id) == Status.COMPLETED
    replies = list(
        ChatMessage.objects.filter(session__agent_id=agent.id, role="assistant").values_list("content", flat=True)
    )
    assert replies == ["The parser is in review."]
    assert chat_reply_for(chat.id)["reply"] == "The parser is in review."
    assert len(provider.calls) == 2
    assert [a.success for a in AgentActivity.objects.filter(mailbox_item_id=chat.id).order_by("started_at")] == [
        False,
        True,
    ]


# ---------------------------------------------------------------------------- symptom 5


def test_an_item_the_judge_defers_runs_after_the_rest_of_its_priority(scripted, agent, monkeypatch):
    arrived: dict[str, MailboxItem] = {}

    def tool(ctx, name, args):  # B arrives during A's first tool round, C during its second
        key = "b" if "b" not in arrived else "c"
        arrived[key] = mailbox_enqueue(
            agent_id=agent.id,
            source_type=T.SYSTEM_EVENT,
            priority=2,
            payload={"summary": key, "content": f"event {key}"},
        )
        return True, '{"ok": true}'

    monkeypatch.setattr(journal, "execute_tool", tool)
    provider = scripted(
        Turn(tool_calls=[("noop", {})]),
        Turn(tool_calls=[("noop", {})]),
        default=Turn(text="handled"),
        judge_word="defer",
    )
    # The judge defers B only; C is judged "continue".
    provider.judge = lambda *, current, new, context: "defer" if new["id"] == arrived["b"].id else "continue"
    a = mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=1, payload={"summary": "a", "content": "event a"}
    )
    run_until_quiet(agent.id)
    b, c = arrived["b"], arrived["c"]
    assert [status(i) for i in (a.id, b.id, c.id)] == [Status.COMPLETED] * 3
    assert AgentDecision.objects.filter(mailbox_item_id=b.id, decision_type="defer").exists()
    assert not AgentDecision.objects.filter(mailbox_item_id=c.id, decision_type="defer").exists()
    assert first_call_order(provider) == [a.id, c.id, b.id]


# ---------------------------------------------------------------------------- symptom 6


def test_the_submit_note_becomes_the_tasks_deliverables_and_reaches_the_reviewer(scripted, agent, bea, human):
    note = "DELIVERABLE: parser in src/parse.py, 14 tests, edge cases covered"
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_agent_id=bea.id)
    scripted(Turn(tool_calls=[("task_submit_review", {"task_id": task.id, "summary": note})]), Turn(text="submitted"))
    run_attention(agent.id)
    task = Task.objects.get(id=task.id)
    assert task.status == "review"
    assert note in (getattr(task, "deliverables", None) or "")
    review = review_requests(bea.id, task.id).get()
    assert note in review.payload["content"]


def test_the_submit_note_is_shown_in_a_human_reviewers_approval(scripted, agent, alice, human):
    note = "DELIVERABLE: parser in src/parse.py, 14 tests, edge cases covered"
    task = task_create(actor=human, title="Write the parser", assignee_id=agent.id, reviewer_user_id=alice.pk)
    scripted(Turn(tool_calls=[("task_submit_review", {"task_id": task.id, "summary": note})]), Turn(text="submitted"))
    run_attention(agent.id)
    task = Task.objects.get(id=task.id)
    assert task.status == "review"
    assert note in (getattr(task, "deliverables", None) or "")
    approval = Approval.objects.get(id=task.metadata["reviewApprovalId"])
    assert note in approval.description
