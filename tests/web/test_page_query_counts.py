"""The work and chat pages read in a number of queries that does not grow with what
they show: each page is counted with N rows of everything it lists, then with 3N
(tasks, requirements, dependencies seen and unseen, comments by people and agents with
replies, status changes, approvals pending and answered; chat messages by the caller,
a teammate and the agent, sessions). alice owns ada (team Core, bob a member) and solo
(no team: its tasks are ones bob may not see)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from markus.agents.models import ChatMessage, ChatSession
from markus.agents.services import main_session
from markus.core.actors import Actor
from markus.work.comment_services import requirement_comment_create, task_comment_create
from markus.work.requirement_services import requirement_create
from markus.work.services import task_create, task_transition
from notifications.services import approval_create, approval_respond

from .conftest import signed_in

pytestmark = pytest.mark.django_db

N = 3


def queries(client: Client, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(ctx.captured_queries)


class Work:
    """The data of the work pages, grown ``n`` at a time around one task and one
    requirement that every page shows."""

    def __init__(self, alice, bob, agent, solo):
        self.alice, self.bob, self.agent, self.solo = alice, bob, agent, solo
        self.actor = Actor.for_user(alice)
        self.made = 0
        self.requirement = requirement_create(actor=self.actor, title="Docs", agent_id=agent.id)
        self.task = task_create(
            actor=self.actor, title="Main", assignee_id=agent.id, requirement_id=self.requirement.id, start=False
        )

    def grow(self, n: int) -> None:
        people = [Actor.for_user(self.alice), Actor.for_user(self.bob), Actor.for_agent(self.agent)]
        last = None
        for i in range(self.made, self.made + n):
            seen = task_create(actor=self.actor, title=f"seen {i}", assignee_id=self.agent.id, start=False)
            unseen = task_create(actor=self.actor, title=f"unseen {i}", assignee_id=self.solo.id, start=False)
            self.task.depends_on.add(seen, unseen)
            task_create(
                actor=self.actor, title=f"part {i}", assignee_id=self.agent.id, requirement_id=self.requirement.id
            )
            requirement_create(actor=self.actor, title=f"req {i}", agent_id=self.agent.id)
            who = people[i % len(people)]
            last = task_comment_create(
                task_id=self.task.id, actor=who, content=f"note {i} @bob", reply_to_comment_id=last.id if last else None
            )
            requirement_comment_create(requirement_id=self.requirement.id, actor=who, content=f"rnote {i}")
            task_transition(task_id=seen.id, to_status="cancelled", actor=who if not who.is_agent else self.actor)
            review = task_create(
                actor=self.actor, title=f"review {i}", assignee_id=self.agent.id, reviewer_user_id=self.alice.pk
            )
            task_transition(task_id=review.id, to_status="review", actor=Actor.for_agent(self.agent))
            asked = approval_create(user=self.alice, title=f"Q{i}", agent=self.agent)
            approval_respond(user=self.alice, approval_id=asked.id, selected_option="approve")
            approval_create(user=self.alice, title=f"open Q{i}", agent=self.agent)
        self.made += n

    def paths(self) -> list[str]:
        return ["/work", f"/work?task={self.task.id}", f"/work?requirement={self.requirement.id}", "/approvals/"]


@pytest.mark.parametrize("who", ["alice", "bob"])
def test_the_work_pages_read_as_many_queries_at_3n_rows_as_at_n(alice, bob, agent, solo, who):
    work = Work(alice, bob, agent, solo)
    client = signed_in(alice if who == "alice" else bob)
    work.grow(N)
    small = {p: queries(client, p) for p in work.paths()}
    work.grow(2 * N)
    page = client.get(f"/work?task={work.task.id}").content.decode()
    if who == "bob":  # the rows are really there for the reader (and the hidden ones counted)
        assert f"{3 * N} tasks you may not see" in page and f"seen {3 * N - 1}" in page
    assert f"note {3 * N - 1}" in page
    assert {p: queries(client, p) for p in work.paths()} == small


def talk(session: ChatSession, n: int, senders: list[str]) -> list[ChatMessage]:
    """``n`` exchanges: a person's message (from each sender in turn), the agent's answer."""
    base = timezone.now() - timedelta(hours=1)
    start = ChatMessage.objects.filter(session=session).count()
    rows = []
    for i in range(n):
        at = base + timedelta(seconds=start + 2 * i)
        rows.append(
            ChatMessage.objects.create(
                session=session,
                role="user",
                content=f"ask {start + i}",
                metadata={"senderId": senders[i % len(senders)]},
                created_at=at,
            )
        )
        rows.append(
            ChatMessage.objects.create(
                session=session, role="assistant", content=f"answer {start + i}", created_at=at + timedelta(seconds=1)
            )
        )
    return rows


def test_the_chat_page_and_its_message_reads_are_flat_from_n_to_3n_messages(alice, bob, charlie, agent):
    session = main_session(agent.id)
    senders = [str(alice.pk), str(bob.pk), str(charlie.pk)]  # charlie: a person who has left the team
    client = signed_in(alice)
    base = f"/agents/{agent.id}/chat/messages/?session={session.id}"

    def counts(first: ChatMessage, last: ChatMessage) -> dict[str, int]:
        return {
            "page": queries(client, f"/agents/{agent.id}/chat/"),
            "before": queries(client, f"{base}&before={last.pk}"),
            "after": queries(client, f"{base}&after={first.pk}"),
        }

    rows = talk(session, N, senders)
    ChatSession.objects.create(agent=agent, user=alice, title="Side")
    small = counts(rows[0], rows[-1])
    rows += talk(session, 2 * N, senders)
    for i in range(2 * N):
        talk(ChatSession.objects.create(agent=agent, user=alice, title=f"S{i}"), 1, senders)
    after = client.get(f"{base}&after={rows[0].pk}").content.decode()
    assert after.count('class="msg') >= 6 * N - 1  # all the newer ones are read and drawn
    assert counts(rows[0], rows[-1]) == small
