"""A chat's reply names the item it answers by a column (``ChatMessage.reply_to``), so
the reply to an item is one indexed query however many replies the agent wrote since
(a follow-up merged into the item reaches it through the merge), and a message that only
mentions an item (a budget's notice) is not taken for its reply."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention.replies import post_chat_reply
from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.chat import chat_reply_for
from markus.agents.models import ChatMessage
from markus.agents.services import agent_message_post, main_session
from tests.web.conftest import enqueue_chat

pytestmark = pytest.mark.django_db


def test_the_reply_is_found_however_many_replies_came_after(agent):
    session = main_session(agent.id)
    asked = enqueue_chat(agent.id, "first question")
    post_chat_reply(agent.id, session.id, "the first answer", answered=[asked.id], metadata={})
    for n in range(60):  # a busy agent answers many others afterwards
        other = enqueue_chat(agent.id, f"question {n}")
        post_chat_reply(agent.id, session.id, f"answer {n}", answered=[other.id], metadata={})

    found = chat_reply_for(asked.id)

    assert found is not None and found["reply"] == "the first answer"
    assert found["sessionId"] == session.id


def test_the_reply_lookup_is_one_indexed_query_after_reading_the_item(agent):
    session = main_session(agent.id)
    asked = enqueue_chat(agent.id, "when?")
    post_chat_reply(agent.id, session.id, "Friday.", answered=[asked.id], metadata={})

    with CaptureQueriesContext(connection) as queries:
        found = chat_reply_for(asked.id)

    assert found is not None and found["reply"] == "Friday."
    assert len(queries) == 2  # the item, then its reply
    assert "reply_to" in queries[1]["sql"] and "mailboxItemIds" not in queries[1]["sql"]
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, "chat_messages")
    assert indexes["idx_chat_reply_to"]["columns"] == ["reply_to"]


def test_a_merged_message_is_answered_by_the_reply_of_the_one_it_joined(agent):
    session = main_session(agent.id)
    lead = enqueue_chat(agent.id, "first")
    follow = enqueue_chat(agent.id, "second")
    MailboxItem.objects.filter(id=follow.id).update(status=Status.MERGED, merged_into_id=lead.id)
    post_chat_reply(agent.id, session.id, "answering both", answered=[lead.id, follow.id], metadata={})

    assert chat_reply_for(follow.id) == {
        "reply": "answering both",
        "sessionId": session.id,
        "mailboxItemId": follow.id,
        "mergedInto": lead.id,
    }
    assert chat_reply_for(lead.id)["reply"] == "answering both"


def test_a_budget_notice_naming_the_chat_is_not_its_reply(agent, alice):
    session = main_session(agent.id)
    waiting = enqueue_chat(agent.id, "are you there?")
    agent_message_post(
        agent_id=agent.id,
        session_id=session.id,
        content="I cannot answer yet: the budget is used up.",
        metadata={
            "budgetNotice": True,
            "budgetPeriod": "2026-12",
            "mailboxItemId": waiting.id,
            "mailboxItemIds": [waiting.id],
        },
        user_id=alice.pk,
    )

    assert chat_reply_for(waiting.id) is None  # the chat still waits in the queue


def test_replies_stored_before_the_column_are_linked_by_the_migration(agent):
    session = main_session(agent.id)
    old = enqueue_chat(agent.id, "asked long ago")
    noticed = enqueue_chat(agent.id, "waiting behind a budget")
    ChatMessage.objects.create(
        session=session, role=ChatMessage.Role.ASSISTANT, content="an old answer", metadata={"mailboxItemIds": [old.id]}
    )
    ChatMessage.objects.create(
        session=session,
        role=ChatMessage.Role.ASSISTANT,
        content="I cannot answer yet",
        metadata={"budgetNotice": True, "mailboxItemIds": [noticed.id]},
    )
    assert chat_reply_for(old.id) is None  # no link yet

    migration = importlib.import_module("markus.agents.migrations.0007_chat_reply_items")
    migration.link_stored_replies(apps, None)
    migration.link_stored_replies(apps, None)  # twice is harmless

    assert chat_reply_for(old.id)["reply"] == "an old answer"
    assert chat_reply_for(noticed.id) is None
