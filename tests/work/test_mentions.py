"""A person ``@mentioned`` in a comment (by username) gets one notification that links to
the task, says who mentioned them and quotes the start of the comment (issue 13)."""

from __future__ import annotations

import pytest

from markus.core.actors import Actor
from markus.work.comment_services import mentioned_usernames
from markus.work.services import requirement_comment_create, requirement_create, task_comment_create, task_create
from notifications.models import UserNotification

from ..conftest import client_for

pytestmark = pytest.mark.django_db

TYPE = "comment_mention"


@pytest.fixture
def task(as_alice, ada, bea):
    return task_create(
        actor=as_alice, title="Port the parser", assignee_id=ada.id, reviewer_agent_id=bea.id, start=False
    )


def mentions(user):
    return list(UserNotification.objects.filter(user=user, type=TYPE).order_by("created_at", "id"))


def pushed_to(user, sent_events):
    return [e["notification"] for g, e in sent_events if g == f"user.{user.pk}" and e["type"] == "notification"]


def test_a_human_mentioned_in_an_agents_comment_is_notified_once_and_live(
    task, ada, bob, sent_events, django_capture_on_commit_callbacks
):
    content = "@bob could you check the grammar? " + "It has many rules. " * 30 + "@BOB again."
    with django_capture_on_commit_callbacks(execute=True):
        comment = task_comment_create(task_id=task.id, actor=Actor.for_agent(ada), content=content)
    [note] = mentions(bob)
    assert note.title == 'Ada mentioned you on task "Port the parser"'
    assert note.body.startswith("@bob could you check the grammar? It has many rules.")
    assert note.body.endswith("…") and len(note.body) <= 281
    assert (note.action_type, note.action_target) == ("navigate", {"path": f"/work?task={task.id}"})
    assert note.metadata == {
        "taskId": task.id,
        "commentId": comment.id,
        "authorId": "ada",
        "authorName": "Ada",
        "authorRole": "agent",
        "agentId": "ada",
    }
    assert note.priority == "high" and not note.read
    [pushed] = pushed_to(bob, sent_events)
    assert pushed["id"] == note.id and pushed["type"] == TYPE


def test_the_author_and_unknown_names_get_nothing(task, ada, alice, bob):
    task_comment_create(task_id=task.id, actor=Actor.for_user(alice), content="@alice note to self; @nobody, @bob")
    assert mentions(alice) == []
    assert UserNotification.objects.filter(type=TYPE).count() == 1
    assert len(mentions(bob)) == 1


def test_a_user_who_cannot_see_the_task_is_not_notified(task, ada, charlie):
    task_comment_create(task_id=task.id, actor=Actor.for_agent(ada), content="@charlie have a look")
    assert mentions(charlie) == []


def test_an_email_address_or_a_longer_name_is_no_mention(task, ada, bob):
    task_comment_create(task_id=task.id, actor=Actor.for_agent(ada), content="write to x@bob.io or @bobby")
    assert mentions(bob) == []


def test_mention_parsing_keeps_order_drops_trailing_punctuation_and_duplicates():
    assert mentioned_usernames("@Bob, then @alice. and @bob!") == ["bob", "alice"]
    assert mentioned_usernames("a@b.c @-x @ y") == []
    assert mentioned_usernames("ask @first.last+tag@example.com.") == ["first.last+tag@example.com"]


def test_each_comment_notifies_once(task, ada, bob):
    task_comment_create(task_id=task.id, actor=Actor.for_agent(ada), content="@bob one")
    task_comment_create(task_id=task.id, actor=Actor.for_agent(ada), content="@bob two")
    assert [n.body for n in mentions(bob)] == ["@bob one", "@bob two"]


def test_a_mention_in_a_requirement_comment_links_to_the_requirement(ada, bob):
    requirement = requirement_create(actor=Actor.for_agent(ada), title="Faster parsing")
    comment = requirement_comment_create(requirement_id=requirement.id, actor=Actor.for_agent(ada), content="@bob ok?")
    [note] = mentions(bob)
    assert note.title == 'Ada mentioned you on requirement "Faster parsing"'
    assert note.action_target == {"path": f"/work?requirement={requirement.id}"}
    assert note.metadata["requirementId"] == requirement.id and note.metadata["commentId"] == comment.id


def test_the_notification_is_listed_by_the_api(task, ada, bob):
    task_comment_create(task_id=task.id, actor=Actor.for_agent(ada), content="@bob ping")
    body = client_for(bob).get(f"/api/notifications?type={TYPE}").json()
    assert body["unreadCount"] == 1
    [row] = body["notifications"]
    assert row["type"] == TYPE and row["actionTarget"] == {"path": f"/work?task={task.id}"}
