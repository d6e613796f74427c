"""Messages through the A2A door become mailbox items, and their tasks follow the
items: the SDK's client sends (blocking and not), gets, lists and cancels; a message id
sent twice makes one task; another caller's task answers like a missing one."""

from __future__ import annotations

import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, ListTasksRequest, Role, TaskState
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from asgiref.sync import async_to_sync

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.a2a.models import A2ATask
from markus.agents.models import ChatSession

from .conftest import a2a_client, send_request

pytestmark = pytest.mark.django_db(transaction=True)
S = TaskState


def test_a_persons_message_is_a_chat_whose_task_completes_with_the_offline_brains_reply(
    celery_worker, base, ada, alice, tokens
):
    async def go():
        async with a2a_client(base, "ada", tokens["alice"], streaming=False) as client:
            [answer] = [e async for e in client.send_message(send_request("Hello Ada, how are you?", "m-1"))]
            again = [e async for e in client.send_message(send_request("Hello Ada, how are you?", "m-1"))]
            got = await client.get_task(GetTaskRequest(id=answer.task.id))
            listed = await client.list_tasks(ListTasksRequest(include_artifacts=True))
            return answer.task, again[0].task, got, listed

    task, twin, got, listed = async_to_sync(go)()
    assert task.status.state == S.TASK_STATE_COMPLETED
    reply = task.status.message.parts[0].text
    assert "offline brain" in reply
    assert [a.parts[0].text for a in task.artifacts] == [reply]
    assert task.history[-1].role == Role.ROLE_AGENT and task.history[-1].parts[0].text == reply
    assert task.history[0].parts[0].text == "Hello Ada, how are you?"
    # The same message id: the same task, one item.
    assert twin.id == task.id and twin.status.state == S.TASK_STATE_COMPLETED
    assert got.id == task.id and got.status.state == S.TASK_STATE_COMPLETED
    assert [t.id for t in listed.tasks] == [task.id] and listed.tasks[0].artifacts[0].parts[0].text == reply
    item = MailboxItem.objects.get(id=task.id)
    assert item.source_type == MailboxType.HUMAN_CHAT and item.status == "completed"
    assert MailboxItem.objects.filter(agent=ada.agent, source_type=MailboxType.HUMAN_CHAT).count() == 1
    # The conversation is alice's own chat session; its id is the task's context.
    session = ChatSession.objects.get(id=task.context_id)
    assert session.user == alice and session.messages.filter(role="assistant", content=reply).exists()


def test_a_message_sent_without_waiting_is_submitted_then_followed_with_get(base, ada, tokens):
    """The answer to a send that does not wait is the task as it is then: no worker has
    begun it here, so submitted (with a worker it may already say working). The loop
    then runs it, and the task is followed to its end with get."""
    from attention.loop import run_attention

    async def send():
        async with a2a_client(base, "ada", tokens["alice"], streaming=False) as client:
            request = send_request("What is on your list today?", "m-2", return_immediately=True)
            [first] = [e async for e in client.send_message(request)]
            return first.task

    async def get(task_id: str):
        async with a2a_client(base, "ada", tokens["alice"], streaming=False) as client:
            return await client.get_task(GetTaskRequest(id=task_id))

    first = async_to_sync(send)()
    assert first.status.state == S.TASK_STATE_SUBMITTED
    assert async_to_sync(get)(first.id).status.state == S.TASK_STATE_SUBMITTED
    assert run_attention(ada.agent.id).processed == 1
    done = async_to_sync(get)(first.id)
    assert done.status.state == S.TASK_STATE_COMPLETED
    assert "offline brain" in done.artifacts[0].parts[0].text


@pytest.mark.pg  # two transactions race for the message id on PostgreSQL
def test_one_message_id_sent_twice_at_once_makes_one_task(base, ada, tokens):
    import asyncio

    async def go():
        async with a2a_client(base, "ada", tokens["alice"], streaming=False) as client:

            async def send():
                request = send_request("Twice at once", "m-twin", return_immediately=True)
                [answer] = [e async for e in client.send_message(request)]
                return answer.task.id

            return await asyncio.gather(send(), send())

    first, second = async_to_sync(go)()
    assert first == second
    assert A2ATask.objects.count() == 1 and MailboxItem.objects.filter(agent=ada.agent).count() == 1


def test_a_waiting_task_is_cancelled_and_another_callers_task_answers_like_a_missing_one(base, ada, tokens):
    # No worker: the item waits in the queue.
    async def go():
        async with a2a_client(base, "ada", tokens["alice"], streaming=False) as alice:
            request = send_request("Please look at this later", "m-3", return_immediately=True)
            [sent] = [e async for e in alice.send_message(request)]
            task_id = sent.task.id
            async with a2a_client(base, "ada", tokens["bob"], streaming=False) as bob:
                for call in (bob.get_task(GetTaskRequest(id=task_id)), bob.cancel_task(CancelTaskRequest(id=task_id))):
                    with pytest.raises(TaskNotFoundError):
                        await call
                assert list((await bob.list_tasks(ListTasksRequest())).tasks) == []
            cancelled = await alice.cancel_task(CancelTaskRequest(id=task_id))
            with pytest.raises(TaskNotCancelableError):
                await alice.cancel_task(CancelTaskRequest(id=task_id))
            return sent.task, cancelled

    sent, cancelled = async_to_sync(go)()
    assert sent.status.state == S.TASK_STATE_SUBMITTED
    assert cancelled.status.state == S.TASK_STATE_CANCELED
    item = MailboxItem.objects.get(id=sent.id)
    assert item.status == "dropped" and "A2A" in item.drop_reason
    assert A2ATask.objects.get(id=sent.id).updates.count() == 2  # submitted, canceled
