"""Comments after the fact (issue 13): a person's comment on a task its assignee already
finished reaches the assignee as a ``session_reply`` that carries what resuming the
task's own session needs; a comment on a task still in progress keeps its usual path."""

from __future__ import annotations

import json

import pytest

from attention import loop
from attention.models import AgentActivity
from mailbox.registry import ActivityType, MailboxType, Priority
from markus.agents.models import Team
from markus.core.actors import Actor
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from markus.work.models import TaskComment, TaskState
from markus.work.services import task_comment_create, task_create, task_transition
from notifications.models import UserNotification

from .conftest import executions, force_status, items


def replies_for(agent):
    return items(agent, MailboxType.SESSION_REPLY)


@pytest.fixture
def worked(ada, bea, cyd, ungated):
    """Cyd delegated a task to Ada, who has executed it (one execution round); Bea reviews."""
    return task_create(
        actor=Actor.for_agent(cyd), title="Port the parser", assignee_id=ada.id, reviewer_agent_id=bea.id
    )


@pytest.mark.django_db
@pytest.mark.parametrize(
    "status", [TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELLED, TaskState.REJECTED, TaskState.ARCHIVED]
)
def test_a_humans_comment_on_a_finished_task_reaches_the_assignee_as_a_session_reply(worked, ada, bob, status):
    [execution] = executions(ada, worked)
    force_status(worked, status)
    comment = task_comment_create(task_id=worked.id, actor=Actor.for_user(bob), content="Why the new grammar?")
    [reply] = replies_for(ada)
    assert reply.payload["taskId"] == worked.id
    assert reply.payload["summary"] == f"bob commented on your {status} task: Port the parser"
    assert reply.payload["extra"] == {
        "commentId": comment.id,
        "comment": "Why the new grammar?",
        "authorId": str(bob.pk),
        "authorName": "bob",
        "authorRole": "user",
        "taskStatus": status,
        "executionItemId": execution.id,
        "executionRound": 1,
    }
    assert reply.metadata == {
        "senderId": str(bob.pk),
        "senderName": "bob",
        "senderRole": "user",
        "commentId": comment.id,
    }
    assert reply.priority == Priority.HIGH
    content = reply.payload["content"]
    assert "Why the new grammar?" in content and f"status {status}" in content
    assert f'task_comment (task_id="{worked.id}", reply_to_comment_id="{comment.id}")' in content
    # The assignee hears about it once, as the session reply, not as a comment too.
    assert items(ada, MailboxType.TASK_COMMENT) == [] and items(ada, MailboxType.MENTION) == []


@pytest.mark.django_db
def test_the_others_still_hear_about_it_as_a_comment(worked, ada, cyd, bob):
    force_status(worked, TaskState.COMPLETED)
    task_comment_create(task_id=worked.id, actor=Actor.for_user(bob), content="Nice work")
    assert len(items(cyd, MailboxType.TASK_COMMENT)) == 1
    assert replies_for(cyd) == []


@pytest.mark.django_db
def test_a_mention_of_the_assignee_on_a_finished_task_is_one_session_reply(worked, ada, bob):
    force_status(worked, TaskState.COMPLETED)
    task_comment_create(task_id=worked.id, actor=Actor.for_user(bob), content="@Ada why YAML?")
    assert len(replies_for(ada)) == 1
    assert items(ada, MailboxType.MENTION) == [] and items(ada, MailboxType.TASK_COMMENT) == []


@pytest.mark.django_db
@pytest.mark.parametrize("status", [TaskState.IN_PROGRESS, TaskState.BLOCKED])
def test_a_comment_on_an_active_task_keeps_the_usual_path(worked, ada, bob, status):
    force_status(worked, status)
    task_comment_create(task_id=worked.id, actor=Actor.for_user(bob), content="How is it going?")
    assert replies_for(ada) == []
    [item] = items(ada, MailboxType.TASK_COMMENT)
    assert item.priority == Priority.CRITICAL


@pytest.mark.django_db
def test_an_agents_comment_on_a_finished_task_keeps_the_usual_path(worked, ada, cyd):
    force_status(worked, TaskState.COMPLETED)
    task_comment_create(task_id=worked.id, actor=Actor.for_agent(cyd), content="Thanks")
    assert replies_for(ada) == []
    assert len(items(ada, MailboxType.TASK_COMMENT)) == 1


@pytest.mark.django_db
def test_a_task_finished_without_its_assignee_ever_working_on_it_keeps_the_usual_path(make_task, ada, bob, as_alice):
    task = make_task()  # pending: never executed
    task_transition(task_id=task.id, to_status=TaskState.REJECTED, actor=as_alice)
    task_comment_create(task_id=task.id, actor=Actor.for_user(bob), content="Why rejected?")
    assert replies_for(ada) == []
    assert len(items(ada, MailboxType.TASK_COMMENT)) == 1


# ---------------------------------------------------------------------------- the real loop


@pytest.fixture
def scripted():
    """The scripted provider of tests/attention/conftest.py, installed for this process."""

    def install(*turns):
        provider = ScriptedProvider(list(turns))
        set_provider_override(provider)
        return provider

    yield install
    set_provider_override(None)


def _execute_and_complete(scripted, ada, bea, cyd):
    """Ada executes the task through the loop and submits it; Bea completes it. (Cyd's
    team lets its agents' tasks start at once.)"""
    Team.objects.filter(id=ada.team_id).update(agent_task_approval=False)
    task = task_create(
        actor=Actor.for_agent(cyd),
        title="Port the parser",
        description="Use the grammar in grammar.ebnf",
        assignee_id=ada.id,
        reviewer_agent_id=bea.id,
    )
    provider = scripted(
        Turn(
            text="Ported it with the LL(1) grammar.",
            tool_calls=[("task_submit_review", {"task_id": task.id, "summary": "parser ported"})],
        ),
        Turn(text="Submitted."),
    )
    loop.run_attention(ada.id)
    task_transition(task_id=task.id, to_status=TaskState.COMPLETED, actor=Actor.for_agent(bea))
    return task, provider


@pytest.mark.django_db(transaction=True)
def test_the_session_reply_runs_the_session_response_scenario_and_the_answer_lands_on_the_task(
    scripted, ada, bea, cyd, bob, sent_events
):
    task, provider = _execute_and_complete(scripted, ada, bea, cyd)
    question = task_comment_create(task_id=task.id, actor=Actor.for_user(bob), content="Why LL(1)?")
    [reply] = replies_for(ada)
    provider.add(
        Turn(
            tool_calls=[
                (
                    "task_comment",
                    {
                        "task_id": task.id,
                        "content": "@bob it keeps the parser predictive.",
                        "reply_to_comment_id": question.id,
                    },
                )
            ]
        ),
        Turn(text="Answered bob."),
    )
    before = len(provider.calls)
    loop.run_attention(ada.id)

    reply.refresh_from_db()
    assert reply.status == "completed"
    calls = [c for c in provider.calls[before:] if c["item"].get("id") == reply.id]
    assert calls and {c["scenario"] for c in calls} == {"session_response"}
    activity = AgentActivity.objects.get(mailbox_item_id=reply.id)
    assert activity.type == ActivityType.RESPOND_IN_SESSION
    answer = TaskComment.objects.get(task=task, author_agent=ada, reply_to=question)
    assert answer.content == "@bob it keeps the parser predictive." and answer.activity_id == activity.id
    task.refresh_from_db()
    assert task.status == TaskState.COMPLETED  # answering does not reopen the task
    # Ada's answer mentions bob: he is told once, live.
    [note] = UserNotification.objects.filter(user=bob, type="comment_mention")
    assert note.metadata["commentId"] == answer.id
    assert any(e["type"] == "notification" and e["notification"]["id"] == note.id for _, e in sent_events)


@pytest.mark.django_db(transaction=True)
def test_the_session_reply_resumes_the_tasks_own_session(scripted, ada, bea, cyd, bob):
    task, provider = _execute_and_complete(scripted, ada, bea, cyd)
    task_comment_create(task_id=task.id, actor=Actor.for_user(bob), content="Why LL(1)?")
    [reply] = replies_for(ada)
    provider.add(Turn(text="Because it is predictive."))
    before = len(provider.calls)
    loop.run_attention(ada.id)
    [call] = [c for c in provider.calls[before:] if c["item"].get("id") == reply.id]
    seen = json.dumps(call["messages"])
    # What the execution saw and said is there, then the comment.
    assert "Use the grammar in grammar.ebnf" in seen and "Ported it with the LL(1) grammar." in seen
    assert "Why LL(1)?" in call["messages"][-1]["content"]


@pytest.mark.django_db(transaction=True)
def test_a_second_comment_continues_the_conversation_of_the_first(scripted, ada, bea, cyd, bob):
    task, provider = _execute_and_complete(scripted, ada, bea, cyd)
    task_comment_create(task_id=task.id, actor=Actor.for_user(bob), content="Why LL(1)?")
    provider.add(Turn(text="Because it is predictive."))
    loop.run_attention(ada.id)
    task_comment_create(task_id=task.id, actor=Actor.for_user(bob), content="And the error messages?")
    second = replies_for(ada)[-1]
    provider.add(Turn(text="They name the expected token."))
    before = len(provider.calls)
    loop.run_attention(ada.id)
    [call] = [c for c in provider.calls[before:] if c["item"].get("id") == second.id]
    seen = json.dumps(call["messages"])
    assert "Ported it with the LL(1) grammar." in seen and "Because it is predictive." in seen
    assert "And the error messages?" in call["messages"][-1]["content"]
