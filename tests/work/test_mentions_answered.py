"""An agent ``@mentioned`` in a comment answers in the thread the mention came from: the
offline brain with a reply to the comment (issue 37, point 3), a real model told to."""

from __future__ import annotations

import pytest

from attention import loop
from attention.scenarios import MENTION_RESPONSE, SCENARIOS
from attention.toolbox import ToolContext, execute_tool
from mailbox.registry import MailboxType
from markus.llm.base import set_provider_override
from markus.llm.offline import OfflineProvider
from markus.work.models import RequirementComment, TaskComment
from markus.work.services import requirement_comment_create, requirement_create, task_comment_create, task_create

from .conftest import items

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def offline():
    set_provider_override(OfflineProvider())
    yield
    set_provider_override(None)


def test_two_agents_mentioned_in_one_comment_each_answer_in_its_thread(offline, as_alice, ada, bea):
    task = task_create(actor=as_alice, title="Port the parser", assignee_id=ada.id, start=False)
    asked = task_comment_create(
        task_id=task.id, actor=as_alice, content="@bea can you double-check the grammar? @ada please also add tests."
    )
    for agent in (ada, bea):
        assert len(items(agent, MailboxType.MENTION)) == 1
        loop.run_attention(agent.id)
    answers = TaskComment.objects.filter(task_id=task.id, author_agent__isnull=False)
    assert sorted(answers.values_list("author_agent_id", flat=True)) == ["ada", "bea"]
    for answer in answers:
        assert answer.reply_to_id == asked.id
        assert "@" not in answer.content  # an answer mentions nobody: no ping-pong between agents


def test_a_mention_on_a_requirement_is_answered_on_the_requirement(offline, as_alice, ada):
    requirement = requirement_create(actor=as_alice, title="A faster parser")
    asked = requirement_comment_create(requirement_id=requirement.id, actor=as_alice, content="@ada what do you think?")
    loop.run_attention(ada.id)
    [answer] = RequirementComment.objects.filter(requirement_id=requirement.id, author_agent_id=ada.id)
    assert answer.reply_to_id == asked.id


def test_a_real_model_is_told_to_answer_in_the_thread():
    said = SCENARIOS[MENTION_RESPONSE].instructions
    assert "task_comment" in said and "requirement_comment" in said and "reply_to_comment_id" in said


def test_a_mention_opens_only_its_own_thread(as_alice, ada, bea):
    mine = task_create(actor=as_alice, title="Port the parser", assignee_id=ada.id, start=False)
    other = task_create(actor=as_alice, title="Something else", assignee_id=ada.id, start=False)
    task_comment_create(task_id=mine.id, actor=as_alice, content="@bea a look?")
    [item] = items(bea, MailboxType.MENTION)
    ctx = ToolContext(agent_id=bea.id, agent_name=bea.name, mailbox_item_id=item.id, scenario=MENTION_RESPONSE)
    assert execute_tool(ctx, "task_get", {"task_id": mine.id})[0]
    ok, said = execute_tool(ctx, "task_get", {"task_id": other.id})
    assert not ok and "that you can see" in said
    elsewhere = ToolContext(agent_id=bea.id, agent_name=bea.name, mailbox_item_id=item.id, scenario="chat")
    assert not execute_tool(elsewhere, "task_get", {"task_id": mine.id})[0]
