"""``/ws/board/``, the work pages' socket, seen by each persona: alice owns ada (team
Core) and solo (no team); bob is a member of Core, not its owner; charlie is an
outsider. A teammate gets the events of the team's tasks and requirements and of the
team's agents coming and going, nothing of the owner's private work; an outsider gets
nothing at all; an agent's own token gets its own tasks only. Events are made the way
the product makes them: committed in the ORM's thread, sent after commit."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async

from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.comment_services import task_comment_create
from markus.work.requirement_services import requirement_cancel, requirement_create
from markus.work.services import task_create, task_transition

from .conftest import session_cookie, ws_connect

pytestmark = [
    pytest.mark.pg,  # also on PostgreSQL with the Redis channel layer
    pytest.mark.django_db(transaction=True),
]


async def board(cookie: bytes | None = None, path: str = "/ws/board/"):
    communicator, connected = await ws_connect(path, cookie=cookie)
    assert connected
    return communicator


async def frames(communicator, quiet: float = 0.5) -> list[dict]:
    """Every frame until the socket has been quiet for ``quiet`` seconds."""
    got = []
    while not await communicator.receive_nothing(timeout=quiet):
        got.append(await communicator.receive_json_from(timeout=3))
    return got


def run_with_sockets(cookies: dict[str, bytes | str], work) -> dict[str, list[dict]]:
    """Open a board socket per name (a session cookie, or a path with ``?token=``), do
    ``work`` in the ORM's thread, and return the frames each socket received."""

    async def go():
        sockets = {}
        for name, how in cookies.items():
            sockets[name] = await (board(path=how) if isinstance(how, str) else board(cookie=how))
        await database_sync_to_async(work)()
        out = {name: await frames(s) for name, s in sockets.items()}
        for s in sockets.values():
            await s.disconnect()
        return out

    return async_to_sync(go)()


def test_a_teammate_gets_the_team_tasks_events_and_an_outsider_none(alice, bob, charlie, agent, solo):
    actor = Actor.for_user(alice)
    team_task = task_create(actor=actor, title="Team notes", assignee_id=agent.id)
    private_task = task_create(actor=actor, title="Solo plan", assignee_id=solo.id)
    comment_ids = []

    def work():
        task_transition(task_id=private_task.id, to_status="blocked", actor=actor)
        task_transition(task_id=team_task.id, to_status="blocked", actor=actor)
        comment_ids.append(task_comment_create(task_id=team_task.id, actor=actor, content="over to you").id)
        task_comment_create(task_id=private_task.id, actor=actor, content="just me")

    got = run_with_sockets(
        {"alice": session_cookie(alice), "bob": session_cookie(bob), "charlie": session_cookie(charlie)}, work
    )
    team_events = [
        {"type": "task:status", "taskId": team_task.id, "fromStatus": "in_progress", "status": "blocked"},
        {"type": "task:comment", "taskId": team_task.id, "commentId": comment_ids[0]},
    ]
    assert got["bob"] == team_events
    assert got["charlie"] == []
    assert {e["taskId"] for e in got["alice"]} == {team_task.id, private_task.id} and len(got["alice"]) == 4


def test_a_teammate_gets_the_team_requirements_events_only(alice, bob, charlie, agent, solo):
    actor = Actor.for_user(alice)
    team_req = requirement_create(actor=actor, title="Team wiki", agent_id=agent.id)
    solo_req = requirement_create(actor=actor, title="Solo roadmap", agent_id=solo.id)

    def work():
        requirement_cancel(requirement_id=solo_req.id, actor=actor, reason="later")
        requirement_cancel(requirement_id=team_req.id, actor=actor, reason="dup")

    got = run_with_sockets({"bob": session_cookie(bob), "charlie": session_cookie(charlie)}, work)
    assert got["bob"] == [
        {"type": "requirement:status", "requirementId": team_req.id, "fromStatus": "in_progress", "status": "cancelled"}
    ]
    assert got["charlie"] == []


def test_agents_coming_and_going_reach_those_who_see_them_with_ids_only(alice, bob, charlie, team):
    def work():
        agent_create(name="Newbie", owner=alice, team=team, agent_id="newbie")
        agent_create(name="Hidden", owner=alice, agent_id="hidden")
        Agent.objects.filter(id="newbie").delete()
        Agent.objects.filter(id="hidden").delete()

    got = run_with_sockets(
        {"alice": session_cookie(alice), "bob": session_cookie(bob), "charlie": session_cookie(charlie)}, work
    )
    newbie = [{"type": "agent:created", "agentId": "newbie"}, {"type": "agent:removed", "agentId": "newbie"}]
    assert got["bob"] == newbie
    assert got["charlie"] == []
    assert [e["agentId"] for e in got["alice"]] == ["newbie", "hidden", "newbie", "hidden"]


def test_an_agents_token_gets_its_own_tasks_events_and_no_agents_events(alice, agent_with_token, agent):
    tok, raw = agent_with_token
    actor = Actor.for_user(alice)
    its_task = task_create(actor=actor, title="For Tok", assignee_id=tok.id)
    other = task_create(actor=actor, title="For Ada", assignee_id=agent.id)

    def work():
        task_transition(task_id=other.id, to_status="blocked", actor=actor)
        task_transition(task_id=its_task.id, to_status="blocked", actor=actor)
        agent_create(name="Peer", owner=alice, team=agent.team, agent_id="peer")

    got = run_with_sockets({"tok": f"/ws/board/?token={raw}"}, work)
    blocked = {"type": "task:status", "taskId": its_task.id, "fromStatus": "in_progress", "status": "blocked"}
    assert got["tok"] == [blocked]


def test_a_socket_without_a_caller_is_refused_with_a_reason(transactional_db):
    async def go():
        communicator, _ = await ws_connect("/ws/board/")
        closed = await communicator.receive_output(timeout=2)
        bad, _ = await ws_connect("/ws/board/?token=not-a-token")
        closed_bad = await bad.receive_output(timeout=2)
        return closed, closed_bad

    closed, closed_bad = async_to_sync(go)()
    assert (closed["code"], closed["reason"]) == (4401, "not signed in")
    assert (closed_bad["code"], closed_bad["reason"]) == (4401, "invalid token")


def test_a_teammate_who_leaves_the_team_gets_nothing_more_on_an_open_socket(alice, bob, team, agent):
    actor = Actor.for_user(alice)
    task = task_create(actor=actor, title="Team notes", assignee_id=agent.id)
    cookie = session_cookie(bob)
    move = database_sync_to_async(task_transition)

    async def go():
        socket = await board(cookie=cookie)
        await move(task_id=task.id, to_status="blocked", actor=actor)
        first = await socket.receive_json_from(timeout=3)
        await database_sync_to_async(team.members.remove)(bob)
        await move(task_id=task.id, to_status="in_progress", actor=actor)
        rest = await frames(socket)
        await socket.disconnect()
        return first, rest

    first, rest = async_to_sync(go)()
    assert first["status"] == "blocked" and rest == []
