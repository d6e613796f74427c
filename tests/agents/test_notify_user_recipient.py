"""Whom ``notify_user`` reaches (seed section 25.1): the person named by
``target_user_id`` if the permission table lets the tool address them; else the person
the agent is talking to now (the item's sender); else the last person who chatted with
it; else its owner; else its team's owner."""

from __future__ import annotations

import pytest

from attention.toolbox import ToolContext, execute_tool
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.core.actors import Actor
from notifications.models import UserNotification

pytestmark = pytest.mark.django_db


def _ctx(agent, item_id: str = "") -> ToolContext:
    return ToolContext(
        agent_id=agent.id, agent_name=agent.name, mailbox_item_id=item_id, activity_id="", scenario="task_execution"
    )


def _chat(agent, user, text: str):
    return mailbox_enqueue(
        agent_id=agent.id,
        source_type="human_chat",
        payload={"text": text},
        metadata=Actor.for_user(user).sender_metadata(),
    )


def _notify(agent, item_id: str = "", **args):
    return execute_tool(_ctx(agent, item_id), "notify_user", {"title": "Build is red", "body": "Nightly.", **args})


def _reached(user) -> bool:
    return UserNotification.objects.filter(user=user, title="Build is red").exists()


def test_without_a_target_and_nobody_chatting_it_reaches_the_owner(agent, alice, bob):
    ok, result = _notify(agent)
    assert ok, result
    assert _reached(alice) and not _reached(bob)


def test_without_a_target_it_reaches_the_last_person_who_chatted_not_the_owner(agent, alice, bob):
    _chat(agent, alice, "morning")
    _chat(agent, bob, "can you look at the build?")  # bob, a teammate, talked last
    ok, result = _notify(agent)  # from a task's execution, nobody's message
    assert ok, result
    assert _reached(bob) and not _reached(alice)
    message = ChatMessage.objects.get(metadata__notifyUser=True)
    assert message.metadata["targetUserId"] == bob.pk


def test_the_person_the_current_item_came_from_comes_before_a_later_chatter(agent, alice, bob):
    asking = _chat(agent, alice, "how is the build?")
    _chat(agent, bob, "me too")
    ok, result = _notify(agent, item_id=asking.id)
    assert ok, result
    assert _reached(alice) and not _reached(bob)


def test_a_last_chatter_who_may_no_longer_see_the_agent_is_passed_over_for_the_owner(agent, team, alice, bob):
    _chat(agent, bob, "hello")
    team.members.remove(bob)  # bob left the team: the agent no longer reaches him
    ok, result = _notify(agent)
    assert ok, result
    assert _reached(alice) and not _reached(bob)


def test_target_user_id_reaches_that_person(agent, alice, bob):
    ok, result = _notify(agent, target_user_id=str(bob.pk))
    assert ok, result
    assert result and _reached(bob) and not _reached(alice)


@pytest.mark.parametrize("who", ["outsider", "missing", "not-a-number"])
def test_target_user_id_of_someone_the_agent_may_not_address_is_refused_and_writes_nothing(agent, charlie, who):
    target = {"outsider": str(charlie.pk), "missing": "99999", "not-a-number": "bob"}[who]
    ok, result = _notify(agent, target_user_id=target)
    assert not ok and "no user" in result
    assert not UserNotification.objects.exists()
    assert not ChatMessage.objects.filter(metadata__notifyUser=True).exists()
