"""A person's comment on a requirement its agent is working on reaches that work (seed
section 3.4), as a comment on a task being executed does: it is merged into the open
item (the requirement's action, or the execution of one of its tasks) and its saved
session hears it on resume, instead of a separate comment_response activity."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from attention import loop
from attention.models import AgentActivity, LLMSession
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.core.actors import Actor
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from markus.work.models import Task
from markus.work.services import requirement_comment_create, requirement_create

from .conftest import items

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]  # the queue: PostgreSQL too


@pytest.fixture
def scripted():
    def install(*turns):
        provider = ScriptedProvider(list(turns))
        set_provider_override(provider)
        return provider

    yield install
    set_provider_override(None)


def _open(item: MailboxItem, scenario: str) -> MailboxItem:
    """The item was begun and preempted: deferred, its session saved."""
    MailboxItem.objects.filter(id=item.id).update(status="deferred", deferred_until=timezone.now() + timedelta(hours=1))
    LLMSession.objects.create(
        id=f"ls_{item.id}",
        agent_id=item.agent_id,
        mailbox_item_id=item.id,
        scenario=scenario,
        messages=[{"role": "user", "content": item.payload["content"]}],
    )
    return item


@pytest.fixture
def in_charge(as_alice, ada):
    """Alice files a requirement and puts Ada in charge: Ada's requirement action."""
    requirement = requirement_create(actor=as_alice, title="Faster builds", agent_id=ada.id)
    [action] = items(ada, T.REQUIREMENT_UPDATE)
    return requirement, action


def test_a_persons_comment_joins_the_open_requirement_action(scripted, in_charge, ada, bob):
    requirement, action = in_charge
    _open(action, "requirement_action")
    requirement_comment_create(requirement_id=requirement.id, actor=Actor.for_user(bob), content="CACHE-THE-DEPS first")
    [comment] = items(ada, T.REQUIREMENT_COMMENT)
    provider = scripted(Turn(text="noted"))
    loop.run_attention(ada.id)  # the comment is processed: merged into the open action
    comment.refresh_from_db()
    assert comment.status == "merged" and comment.merged_into_id == action.id
    assert "CACHE-THE-DEPS" in MailboxItem.objects.get(id=action.id).payload["content"]
    assert not AgentActivity.objects.filter(mailbox_item_id=comment.id).exists()
    assert provider.calls == []  # no separate comment_response call
    MailboxItem.objects.filter(id=action.id).update(deferred_until=timezone.now())
    loop.run_attention(ada.id)  # the action resumes with the comment in its session
    assert provider.calls and "CACHE-THE-DEPS" in json.dumps(provider.calls[0]["messages"])


def test_a_persons_comment_reaches_the_execution_of_one_of_its_tasks(scripted, as_alice, ada, bea, bob):
    requirement = requirement_create(actor=as_alice, title="Faster builds")
    task = Task.objects.create(
        id="t_req", title="Cache deps", status="in_progress", assignee=ada, reviewer_agent=bea, requirement=requirement
    )
    requirement.metadata = {"agentId": ada.id}
    requirement.save(update_fields=["metadata"])
    execution = MailboxItem.objects.create(
        agent_id=ada.id,
        source_type=T.TASK_STATUS_UPDATE,
        payload={"summary": "run", "content": "do it", "taskId": task.id, "extra": {"triggerExecution": True}},
    )
    _open(execution, "task_execution")
    requirement_comment_create(requirement_id=requirement.id, actor=Actor.for_user(bob), content="USE-SCCACHE")
    [comment] = items(ada, T.REQUIREMENT_COMMENT)
    scripted(Turn(text="noted"))
    loop.run_attention(ada.id)
    comment.refresh_from_db()
    assert comment.status == "merged" and comment.merged_into_id == execution.id
    assert "USE-SCCACHE" in MailboxItem.objects.get(id=execution.id).payload["content"]


def test_without_open_work_the_comment_is_answered_by_itself(scripted, in_charge, ada, bob):
    requirement, action = in_charge
    MailboxItem.objects.filter(id=action.id).update(status="completed")
    requirement_comment_create(requirement_id=requirement.id, actor=Actor.for_user(bob), content="Any news?")
    [comment] = items(ada, T.REQUIREMENT_COMMENT)
    provider = scripted(Turn(text="answered"))
    loop.run_attention(ada.id)
    comment.refresh_from_db()
    assert comment.status == "completed" and comment.merged_into_id is None
    assert [c["item"]["id"] for c in provider.calls] == [comment.id]
