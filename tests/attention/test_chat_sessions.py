"""Chat sessions: the list and its paged messages (with who may see which), chatting into
a named session with the history read back from the database, and ``notify_user``
messages that land in the main session, are pushed live, and give a reply their
task and requirement."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from attention.toolbox import ToolContext, execute_tool
from mailbox.models import MailboxItem
from markus.agents.models import ChatMessage, ChatSession
from markus.agents.services import agent_create, main_session
from markus.llm.base import CONTEXT_MARK
from markus.llm.scripted import Turn

from ..conftest import client_for

pytestmark = pytest.mark.pg  # also on PostgreSQL, with the Redis channel layer


def _say(session: ChatSession, role: str, content: str, minutes_ago: float) -> ChatMessage:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    m = ChatMessage.objects.create(session=session, role=role, content=content, created_at=at)
    ChatSession.objects.filter(id=session.id).update(last_message_at=at)
    return m


@pytest.fixture
def sessions(agent, alice, bob):
    """The main session (older talk), a shared one (newest talk), an empty one of
    alice's, and bob's own one."""
    main = main_session(agent.id)
    _say(main, "user", "first", 30)
    _say(main, "assistant", "hello", 29)
    shared = ChatSession.objects.create(agent=agent, title="Release planning")
    _say(shared, "user", "when do we ship?", 5)
    _say(shared, "assistant", "Friday", 4)
    _say(shared, "user", "thanks", 3)
    empty = ChatSession.objects.create(
        agent=agent, user=alice, title="Scratch", created_at=timezone.now() - timedelta(hours=1)
    )
    bobs = ChatSession.objects.create(agent=agent, user=bob, title="Bob's private")
    _say(bobs, "user", "secret", 1)
    return {"main": main, "shared": shared, "empty": empty, "bobs": bobs}


@pytest.mark.django_db
def test_sessions_list_the_main_one_first_then_the_newest_with_last_message_and_count(agent, alice_client, sessions):
    r = alice_client.get(f"/api/agents/{agent.id}/sessions")
    assert r.status_code == 200, r.content
    rows = r.json()["sessions"]
    assert [s["id"] for s in rows] == [sessions["main"].id, sessions["shared"].id, sessions["empty"].id]
    main, shared, empty = rows
    assert (main["kind"], main["messageCount"], main["lastMessage"]["content"]) == ("main", 2, "hello")
    assert main["lastMessage"]["role"] == "assistant"
    assert (shared["kind"], shared["title"], shared["messageCount"]) == ("chat", "Release planning", 3)
    assert shared["lastMessage"]["content"] == "thanks" and shared["lastMessageAt"] is not None
    assert (empty["messageCount"], empty["lastMessage"]) == (0, None)
    # bob sees his own session (newest) and not alice's
    ids = [
        s["id"] for s in client_for(sessions["bobs"].user).get(f"/api/agents/{agent.id}/sessions").json()["sessions"]
    ]
    assert ids == [sessions["main"].id, sessions["bobs"].id, sessions["shared"].id]


@pytest.mark.django_db
def test_an_agent_without_sessions_lists_its_main_session(agent, alice_client):
    rows = alice_client.get(f"/api/agents/{agent.id}/sessions").json()["sessions"]
    assert [(s["kind"], s["messageCount"], s["lastMessage"]) for s in rows] == [("main", 0, None)]


@pytest.mark.django_db
def test_messages_page_newest_first_by_cursor_to_the_end(agent, alice_client, sessions):
    base = f"/api/agents/{agent.id}/sessions/{sessions['shared'].id}/messages"
    first = alice_client.get(f"{base}?limit=2").json()
    assert [m["content"] for m in first["messages"]] == ["thanks", "Friday"]
    assert first["sessionId"] == sessions["shared"].id and first["nextCursor"] is not None
    second = alice_client.get(f"{base}?limit=2&before={first['nextCursor']}").json()
    assert [m["content"] for m in second["messages"]] == ["when do we ship?"]
    assert second["nextCursor"] is None
    assert set(second["messages"][0]) == {"id", "role", "content", "metadata", "createdAt"}


@pytest.mark.django_db
def test_messages_with_the_same_time_page_without_loss_or_repeat(agent, alice_client):
    session = main_session(agent.id)
    at = timezone.now()
    for i in range(7):
        ChatMessage.objects.create(session=session, role="user", content=f"m{i}", created_at=at)
    seen, cursor = [], None
    while True:
        url = f"/api/agents/{agent.id}/sessions/{session.id}/messages?limit=3" + (f"&before={cursor}" if cursor else "")
        page = alice_client.get(url).json()
        seen += [m["content"] for m in page["messages"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [f"m{i}" for i in reversed(range(7))]


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query", ["before=abc", "before=999999", "before=%C2%B3", "before=%D9%A3", "limit=0", "limit=x"]
)
def test_bad_paging_parameters_are_a_400_with_a_message(agent, alice_client, sessions, query):
    r = alice_client.get(f"/api/agents/{agent.id}/sessions/{sessions['shared'].id}/messages?{query}")
    assert r.status_code == 400 and r.json()["detail"]


@pytest.mark.django_db
def test_a_cursor_of_another_session_is_a_400(agent, alice_client, sessions):
    other = ChatMessage.objects.filter(session=sessions["main"]).first()
    r = alice_client.get(f"/api/agents/{agent.id}/sessions/{sessions['shared'].id}/messages?before={other.pk}")
    assert r.status_code == 400 and "before" in r.json()["detail"]


@pytest.mark.django_db
def test_sessions_of_another_agent_or_person_and_strangers_are_404(
    agent, alice, team, alice_client, charlie_client, sessions
):
    other, _ = agent_create(name="Grace", owner=alice, team=team)
    foreign = main_session(other.id)
    assert alice_client.get(f"/api/agents/{agent.id}/sessions/{foreign.id}/messages").status_code == 404
    assert alice_client.get(f"/api/agents/{agent.id}/sessions/{sessions['bobs'].id}/messages").status_code == 404
    assert alice_client.get(f"/api/agents/{agent.id}/sessions/nope/messages").status_code == 404
    assert charlie_client.get(f"/api/agents/{agent.id}/sessions").status_code == 404
    assert charlie_client.get(f"/api/agents/{agent.id}/sessions/{sessions['main'].id}/messages").status_code == 404


@pytest.mark.django_db
def test_the_agent_itself_sees_every_one_of_its_sessions(agent_with_token, bob):
    from rest_framework.test import APIClient

    agent, token = agent_with_token
    private = ChatSession.objects.create(agent=agent, user=bob, title="Bob's")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    ids = [s["id"] for s in client.get(f"/api/agents/{agent.id}/sessions").json()["sessions"]]
    assert private.id in ids


@pytest.mark.django_db
def test_creating_a_session_makes_it_the_callers_own(agent, alice, alice_client, bob):
    r = alice_client.post(f"/api/agents/{agent.id}/sessions", {"title": "  Design review "}, format="json")
    assert r.status_code == 201, r.content
    row = r.json()
    assert (row["kind"], row["title"], row["userId"], row["messageCount"]) == ("chat", "Design review", alice.pk, 0)
    assert ChatSession.objects.get(id=row["id"]).user == alice
    assert client_for(bob).get(f"/api/agents/{agent.id}/sessions/{row['id']}/messages").status_code == 404
    bad = alice_client.post(f"/api/agents/{agent.id}/sessions", {"title": 5}, format="json")
    assert bad.status_code == 400 and "title" in bad.json()["detail"]
    long = alice_client.post(f"/api/agents/{agent.id}/sessions", {"title": "x" * 201}, format="json")
    assert long.status_code == 400 and "200" in long.json()["detail"]


# ---------------------------------------------------------------------------- chat into a session


@pytest.mark.django_db
@pytest.mark.parametrize("which", ["unknown", "other agent", "another person's"])
def test_chat_into_a_session_that_is_not_this_agents_is_a_400_and_enqueues_nothing(
    agent, alice, team, alice_client, sessions, which
):
    other, _ = agent_create(name="Grace", owner=alice, team=team)
    sid = {"unknown": "ses_nope", "other agent": main_session(other.id).id, "another person's": sessions["bobs"].id}
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "hi", "sessionId": sid[which]}, format="json")
    assert r.status_code == 400 and "sessionId" in r.json()["detail"]
    assert not MailboxItem.objects.filter(agent=agent).exists()


def test_chat_into_a_named_session_answers_there_with_that_sessions_history(
    celery_worker, scripted, agent, alice_client
):
    session = ChatSession.objects.create(agent=agent, title="Release planning")
    _say(session, "user", "when do we ship?", 5)
    _say(session, "assistant", "Friday.", 4)
    _say(main_session(agent.id), "user", "unrelated main talk", 3)
    provider = scripted(Turn(text="Yes, Friday at noon."))
    r = alice_client.post(
        f"/api/agents/{agent.id}/chat", {"text": "still Friday?", "sessionId": session.id}, format="json"
    )
    assert r.status_code == 200, r.content
    assert r.json() == {
        "reply": "Yes, Friday at noon.",
        "mailboxItemId": r.json()["mailboxItemId"],
        "sessionId": session.id,
    }
    # The LLM saw this session's history, read from the database, and not the main one's.
    sent = [m["content"] for m in provider.calls[0]["messages"] if not m["content"].startswith(CONTEXT_MARK)]
    assert sent == ["when do we ship?", "Friday.", "still Friday?"]
    stored = list(
        ChatMessage.objects.filter(session=session).order_by("created_at", "id").values_list("role", "content")
    )
    assert stored[-2:] == [("user", "still Friday?"), ("assistant", "Yes, Friday at noon.")]
    assert not ChatMessage.objects.filter(session__is_main=True, content="still Friday?").exists()
    listed = alice_client.get(f"/api/agents/{agent.id}/sessions").json()["sessions"]
    row = next(s for s in listed if s["id"] == session.id)
    assert row["messageCount"] == 4 and row["lastMessage"]["content"] == "Yes, Friday at noon."


# ---------------------------------------------------------------------------- notify_user


def _tool_ctx(agent, item_id: str = "") -> ToolContext:
    return ToolContext(
        agent_id=agent.id, agent_name=agent.name, mailbox_item_id=item_id, activity_id="", scenario="task_execution"
    )


@pytest.mark.django_db
def test_notify_user_lands_in_the_main_session_with_its_context_and_is_pushed_live(
    agent, alice, sent_events, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        ok, result = execute_tool(
            _tool_ctx(agent),
            "notify_user",
            {
                "title": "Build is red",
                "body": "The nightly failed.",
                "related_task_id": "tsk_1",
                "related_requirement_id": "req_9",
                "priority": "high",
            },
        )
    assert ok, result
    message = ChatMessage.objects.get(session=main_session(agent.id), metadata__notifyUser=True)
    assert message.role == "assistant" and message.content.startswith("**Build is red**\n\nThe nightly failed.")
    assert "<!-- notify_context: task_id=tsk_1, requirement_id=req_9 -->" in message.content
    assert (message.metadata["taskId"], message.metadata["requirementId"], message.metadata["priority"]) == (
        "tsk_1",
        "req_9",
        "high",
    )
    pushed = {group: e for group, e in sent_events if e["type"] == "chat:message"}
    assert set(pushed) == {f"user.{alice.pk}", f"agent.{agent.id}"}
    assert pushed[f"user.{alice.pk}"]["message"]["id"] == message.pk
    assert pushed[f"user.{alice.pk}"]["sessionId"] == main_session(agent.id).id
    [note] = [e for group, e in sent_events if e["type"] == "notification" and group == f"user.{alice.pk}"]
    assert note["notification"]["metadata"]["messageId"] == message.pk


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args,needle",
    [
        ({"priority": "meh"}, "priority"),
        ({"related_task_id": 5}, "related_task_id"),
        ({"related_requirement_id": ["r"]}, "related_requirement_id"),
    ],
)
def test_notify_user_refuses_bad_arguments_and_writes_nothing(agent, args, needle):
    ok, result = execute_tool(_tool_ctx(agent), "notify_user", {"title": "t", "body": "b", **args})
    assert not ok and needle in result
    assert not ChatMessage.objects.filter(metadata__notifyUser=True).exists()


def test_a_reply_to_a_notification_carries_its_task_and_requirement_into_the_chat(
    celery_worker, scripted, agent, alice_client
):
    ok, _ = execute_tool(
        _tool_ctx(agent),
        "notify_user",
        {"title": "Need input", "body": "Which DB?", "related_task_id": "tsk_7", "related_requirement_id": "req_3"},
    )
    assert ok
    notice = ChatMessage.objects.get(metadata__notifyUser=True)
    provider = scripted(Turn(text="Noted: PostgreSQL for task tsk_7."))
    r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "PostgreSQL please"}, format="json")
    assert r.status_code == 200, r.content
    item = MailboxItem.objects.get(id=r.json()["mailboxItemId"])
    assert (item.task_id, item.requirement_id) == ("tsk_7", "req_3")
    assert item.metadata["notifyContext"] == {"messageId": notice.pk, "taskId": "tsk_7", "requirementId": "req_3"}
    call = provider.calls[0]
    assert (call["item"]["taskId"], call["item"]["requirementId"]) == ("tsk_7", "req_3")
    assert any("notify_context: task_id=tsk_7" in m["content"] for m in call["messages"])
    # The reply itself is the session's last message now: the next chat has no context.
    provider.add(Turn(text="Anything else?"))
    r2 = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "thanks"}, format="json")
    assert r2.status_code == 200 and r2.json()["reply"] == "Anything else?"
    item2 = MailboxItem.objects.get(id=r2.json()["mailboxItemId"])
    assert item2.task_id is None and "notifyContext" not in item2.metadata
