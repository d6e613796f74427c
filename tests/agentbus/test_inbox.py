"""The inbox: everything said to an agent across streams, in position order, never its
own messages, never others' conversations; every answer carries next_cursor."""

from __future__ import annotations

import random

import pytest

from agentbus import selectors, services
from agentbus.cursors import decode_cursor, encode_cursor
from markus.agents.models import Agent
from markus.agents.services import agent_create

from .conftest import say

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def texts(result) -> list[str]:
    return [m["payload"]["text"] for m in result["messages"]]


def test_inbox_spans_streams_in_the_order_they_were_appended(eve, max_, ada):
    a = services.stream_open(sender=max_.agent, recipient=eve.agent)
    b = services.stream_open(sender=ada.agent, recipient=eve.agent)
    for stream, text in [(a, "a1"), (b, "b1"), (a, "a2"), (b, "b2")]:
        services.stream_append(stream_id=stream.id, sender=stream.sender, payload={"text": text})
    result = selectors.inbox_read("eve")
    assert texts(result) == ["a1", "b1", "a2", "b2"]
    assert [m["createdAt"] for m in result["messages"]] == sorted(m["createdAt"] for m in result["messages"])


def test_the_cursor_resumes_exactly_where_the_last_answer_stopped(eve, max_):
    say(max_, eve, "one")
    first = selectors.inbox_read("eve")
    say(max_, eve, "two")
    second = selectors.inbox_read("eve", after_cursor=first["next_cursor"])
    assert texts(second) == ["two"]
    assert texts(selectors.inbox_read("eve", after_cursor=second["next_cursor"])) == []


def test_an_empty_answer_still_carries_a_cursor(eve):
    result = selectors.inbox_read("eve")
    assert result["messages"] == [] and decode_cursor(result["next_cursor"], agent_id="eve", clock=0) == 0


def test_limit_pages_through_the_inbox_without_gaps(eve, max_):
    for i in range(7):
        say(max_, eve, f"m{i}")
    seen, cursor = [], None
    for _ in range(4):
        page = selectors.inbox_read("eve", after_cursor=cursor, limit=3)
        seen += texts(page)
        cursor = page["next_cursor"]
    assert seen == [f"m{i}" for i in range(7)]


def test_own_messages_never_reach_the_inbox(eve, max_, ada):
    group = services.stream_open(sender=eve.agent, members=[max_.agent, ada.agent])
    services.stream_append(stream_id=group.id, sender=eve.agent, payload={"text": "mine"})
    services.stream_append(stream_id=group.id, sender=max_.agent, payload={"text": "theirs"})
    say(eve, max_, "direct from eve")
    assert texts(selectors.inbox_read("eve")) == ["theirs"]
    assert texts(selectors.inbox_read("max")) == ["mine", "direct from eve"]


def test_other_agents_conversations_never_reach_the_inbox(eve, max_, ada):
    say(max_, ada, "between max and ada")
    services.stream_open(sender=max_.agent, members=[ada.agent])  # a group without eve
    assert selectors.inbox_read("eve")["messages"] == []
    assert selectors.pending_count("eve") == 0


def test_the_sender_of_a_direct_stream_does_not_watch_it(eve, max_):
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent)
    services.stream_append(stream_id=stream.id, sender=eve.agent, payload={"text": "q"})
    reply = services.stream_open(sender=max_.agent, recipient=eve.agent, reply_to=stream.id)
    services.stream_append(stream_id=reply.id, sender=max_.agent, payload={"text": "a"})
    assert texts(selectors.inbox_read("eve")) == ["a"]


def test_a_cursor_is_bound_to_its_agent(eve, max_):
    cursor = encode_cursor("max", 10**6)
    assert decode_cursor(cursor, agent_id="eve", clock=10**7) is None
    assert decode_cursor(cursor, agent_id="max", clock=10**7) == 10**6


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_membership_exclusions_hold_for_random_conversations(alice, team, seed):
    """Random agents, direct and group streams and messages: each inbox holds exactly
    the messages on streams it can see, minus its own."""
    rng = random.Random(seed)
    agents = [
        agent_create(
            name=f"a{i}",
            owner=alice,
            team=team,
            agent_id=f"r{seed}-{i}",
            kind=rng.choice([Agent.Kind.INTERNAL, Agent.Kind.EXTERNAL]),
        )[0]
        for i in range(6)
    ]
    expected: dict[str, list[str]] = {a.id: [] for a in agents}
    streams = []
    for _ in range(10):
        sender = rng.choice(agents)
        others = [a for a in agents if a.id != sender.id]
        if rng.random() < 0.5:
            recipient = rng.choice(others)
            stream = services.stream_open(sender=sender, recipient=recipient)
            streams.append((stream, [sender], [recipient.id]))
        else:
            members = rng.sample(others, rng.randint(1, 4))
            stream = services.stream_open(sender=sender, members=members)
            everyone = [sender, *members]
            streams.append((stream, everyone, [a.id for a in everyone]))
    for n in range(60):
        stream, writers, audience = rng.choice(streams)
        writer = rng.choice(writers)
        text = f"{seed}:{n}"
        services.stream_append(stream_id=stream.id, sender=writer, payload={"text": text})
        for agent_id in audience:
            if agent_id != writer.id:
                expected[agent_id].append(text)
    for agent in agents:
        assert texts(selectors.inbox_read_from(agent.id, 0, limit=500)) == expected[agent.id], agent.id
        # An internal agent's mailbox took its messages: nothing waits on its bus inbox.
        waiting = 0 if agent.kind == Agent.Kind.INTERNAL else len(expected[agent.id])
        assert selectors.pending_count(agent.id) == waiting
