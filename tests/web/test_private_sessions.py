"""A private chat session is private everywhere its content appears: a person's own
session (here bob's, a teammate of the agent's owner) is read by that person, staff and
the agent; the owner of the agent reads a placeholder in the mailbox, the mind, the
decisions, the activity logs, the pages, and the live events (the reply's stream of
deltas not at all). Run on the real loop, with a marker the chat and its reply carry."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from mailbox.representation import PLACEHOLDER
from markus.llm.scripted import Turn
from tests.attention.conftest import celery_worker, scripted, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)
from tests.conftest import client_for

from .conftest import session_cookie, ws_connect

pytestmark = pytest.mark.django_db(transaction=True)

MARKER = "MARKER-7f3a"


async def collect(communicator, until: str, timeout: float = 30.0) -> list[str]:
    """Frames until one contains ``until`` (or the time is up), then what follows
    within half a second. (``receive_nothing`` waits without cancelling the socket,
    which a ``receive_from`` that times out does.)"""
    frames: list[str] = []
    deadline = asyncio.get_running_loop().time() + timeout
    seen = False
    while asyncio.get_running_loop().time() < deadline:
        if await communicator.receive_nothing(timeout=0.5):
            if seen:
                return frames
            continue
        frames.append(await communicator.receive_from())
        seen = seen or until in frames[-1]
    return frames


def test_a_private_sessions_content_reaches_only_its_person_staff_and_the_agent(
    alice, bob, agent, celery_worker, scripted, django_user_model
):
    scripted(Turn(text=f"About {MARKER}: here is the plan, in a few words.", chunk_delay=0.02))
    session_id = client_for(bob).post(f"/api/agents/{agent.id}/sessions", {"title": "mine"}, format="json").json()["id"]
    owner_cookie, person_cookie = session_cookie(alice), session_cookie(bob)

    async def go():
        sockets = {
            "owner-json": await ws_connect(f"/ws/agents/{agent.id}/", cookie=owner_cookie),
            "owner-mind": await ws_connect(f"/ws/agents/{agent.id}/mind/", cookie=owner_cookie),
            "person-json": await ws_connect(f"/ws/agents/{agent.id}/", cookie=person_cookie),
        }
        try:
            assert all(connected for _, connected in sockets.values())
            await sockets["owner-mind"][0].receive_from(timeout=10)  # the refresh

            def post():
                body = {
                    "sourceType": MailboxType.HUMAN_CHAT,
                    "payload": {"summary": f"{MARKER} secret", "content": f"The {MARKER} plan"},
                    "metadata": {"sessionId": session_id},
                }
                response = client_for(bob).post(f"/api/agents/{agent.id}/mailbox", body, format="json")
                assert response.status_code == 201, response.content
                return response.json()["id"]

            from asgiref.sync import sync_to_async

            item_id = await sync_to_async(post)()
            await sync_to_async(wait_for)(
                lambda: MailboxItem.objects.filter(id=item_id, status="completed").exists(), 30
            )
            return item_id, {
                name: await collect(c, '"completed"' if "json" in name else 'data-status="completed"')
                for name, (c, _) in sockets.items()
            }
        finally:
            for c, _ in sockets.values():
                await c.disconnect()

    item_id, frames = async_to_sync(go)()
    item = MailboxItem.objects.get(id=item_id)
    assert item.marks["privateTo"] == bob.pk

    # Live: the person hears it all, the owner nothing of it (not even the reply's deltas).
    person = "".join(frames["person-json"])
    assert MARKER in person and '"agent:delta"' in person
    for name in ("owner-json", "owner-mind"):
        seen = "".join(frames[name])
        assert item_id in seen, name  # the item is shown, as a private conversation
        assert MARKER not in seen, (name, [f for f in frames[name] if MARKER in f][:1])
    assert '"agent:delta"' not in "".join(frames["owner-json"])
    assert PLACEHOLDER in "".join(frames["owner-json"])

    # Every read of the owner (and of an outsider who sees the agent through staff, no).
    owner = client_for(alice)
    activities = list(AgentActivity.objects.filter(mailbox_item_id=item_id).values_list("id", flat=True))
    assert activities
    reads = [
        f"/api/agents/{agent.id}/mailbox",
        f"/api/agents/{agent.id}/mind",
        f"/api/agents/{agent.id}/decisions",
        f"/api/agents/{agent.id}/sessions",
        *(f"/api/agents/{agent.id}/activity-logs?activityId={a}" for a in activities),
    ]
    for url in reads:
        response = owner.get(url)
        assert response.status_code == 200, url
        assert MARKER not in response.content.decode(), url
    assert owner.get(f"/api/agents/{agent.id}/sessions/{session_id}/messages").status_code == 404
    page = Client()
    page.force_login(alice)
    pages = [
        f"/agents/{agent.id}/mind/",
        f"/agents/{agent.id}/mind/timeline/",
        *(f"/agents/{agent.id}/mind/activities/{a}/logs/" for a in activities),
    ]
    for url in pages:
        response = page.get(url)
        assert response.status_code == 200, url
        assert MARKER not in response.content.decode(), url
    assert PLACEHOLDER in page.get(f"/agents/{agent.id}/mind/").content.decode()

    # The daily report, which the whole team reads, names it only as a private conversation.
    from datetime import timedelta

    from django.utils import timezone

    from attention.selectors import day_activity

    now = timezone.now()
    day = day_activity(agent.id, now - timedelta(hours=1), now + timedelta(hours=1))
    assert day["total"] >= 1 and MARKER not in json.dumps(day)

    # The person and staff read it.
    mailbox = json.dumps(client_for(bob).get(f"/api/agents/{agent.id}/mailbox").json())
    assert MARKER in mailbox
    staff = django_user_model.objects.create_user("root", password="x", is_staff=True)
    assert MARKER in json.dumps(client_for(staff).get(f"/api/agents/{agent.id}/mailbox").json())
    logs = client_for(bob).get(f"/api/agents/{agent.id}/activity-logs?activityId={activities[0]}")
    assert MARKER in logs.content.decode()


def test_nobody_writes_into_another_persons_private_session(alice, bob, agent):
    session_id = client_for(bob).post(f"/api/agents/{agent.id}/sessions", {}, format="json").json()["id"]
    body = {
        "sourceType": MailboxType.HUMAN_CHAT,
        "payload": {"summary": "hello", "content": "hello"},
        "metadata": {"sessionId": session_id},
    }
    response = client_for(alice).post(f"/api/agents/{agent.id}/mailbox", body, format="json")
    assert response.status_code == 400
    assert "sessionId" in response.json()["detail"]
    assert not MailboxItem.objects.filter(agent=agent).exists()


def test_a_chat_folds_only_into_a_chat_of_its_own_session(alice, bob, agent):
    from mailbox.merge import may_merge
    from mailbox.services import mailbox_enqueue

    def chat(session):
        meta = {"sessionId": session} if session else {}
        return mailbox_enqueue(
            agent_id=agent.id,
            source_type=MailboxType.HUMAN_CHAT,
            payload={"summary": "x", "content": "x"},
            metadata=meta,
        )

    main, private, private_again = chat(None), chat("sess-bob"), chat("sess-bob")
    assert not may_merge(main, private) and not may_merge(private, main)
    assert may_merge(private, private_again)


def test_an_activity_over_private_conversations_shows_its_logs_only_to_whom_it_may(
    alice, bob, agent, django_user_model
):
    from attention.models import AgentActivityLog
    from attention.records import private_to_all
    from mailbox.services import mailbox_enqueue

    def chat(marks):
        return mailbox_enqueue(
            agent_id=agent.id,
            source_type=MailboxType.HUMAN_CHAT,
            payload={"summary": MARKER, "content": MARKER},
            marks=marks,
        )

    public, bobs, alices = chat({}), chat({"privateTo": bob.pk}), chat({"privateTo": alice.pk})
    assert private_to_all([public]) is None
    assert private_to_all([public, bobs]) == bob.pk
    assert private_to_all([bobs, alices]) == 0  # several people's: staff and the agent only
    # A deliberation's activity (on no item) weighing bob's conversation.
    activity = AgentActivity.objects.create(
        agent=agent, type="internal", label="Deliberation: 2 item(s) waiting", private_to=bob.pk
    )
    AgentActivityLog.objects.create(activity=activity, seq=1, type="llm_request", content=f"queue: {MARKER}")
    url = f"/api/agents/{agent.id}/activity-logs?activityId={activity.id}"
    assert MARKER not in client_for(alice).get(url).content.decode()
    assert MARKER in client_for(bob).get(url).content.decode()
    page = Client()
    page.force_login(alice)
    assert MARKER not in page.get(f"/agents/{agent.id}/mind/activities/{activity.id}/logs/").content.decode()
