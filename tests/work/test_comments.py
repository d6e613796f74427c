"""Comments on tasks and requirements: reply-to, the notification payload, the agent
streak, mentions and the review suppression (seed 3.5, 3.6, 15)."""

from __future__ import annotations

import json

import pytest

from mailbox.registry import MailboxType, Priority
from markus.core.actors import Actor
from markus.work.comment_services import mentioned_agents
from markus.work.errors import WorkError
from markus.work.models import TaskComment, TaskState
from markus.work.selectors import task_comments
from markus.work.services import (
    requirement_comment_create,
    requirement_create,
    task_comment_create,
    task_create,
    task_transition,
)

from .conftest import force_status, items

pytestmark = pytest.mark.django_db


@pytest.fixture
def delegated(ada, bea, cyd):
    """Cyd created a task for Ada; Bea reviews."""
    return task_create(
        actor=Actor.for_agent(cyd), title="Port the parser", assignee_id=ada.id, reviewer_agent_id=bea.id, start=False
    )


def comments_for(agent):
    return items(agent, MailboxType.TASK_COMMENT)


def test_a_human_comment_notifies_the_assignee_and_the_creator_agent(delegated, bob, ada, cyd, bea):
    comment = task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="Use the new grammar.")
    for agent in (ada, cyd):
        [item] = comments_for(agent)
        assert item.payload["taskId"] == delegated.id
        assert item.payload["summary"] == "bob commented on task: Port the parser"
        assert item.metadata == {
            "senderId": str(bob.pk),
            "senderName": "bob",
            "senderRole": "user",
            "commentId": comment.id,
            "agentStreak": 0,
        }
        assert item.priority == Priority.CRITICAL  # a human's comment goes first
    assert comments_for(bea) == []


def test_the_notification_carries_the_context_first_protocol(delegated, bob, ada):
    comment = task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="Why YAML?")
    content = comments_for(ada)[0].payload["content"]
    assert "Why YAML?" in content
    assert "MANDATORY" in content
    assert f'task_get("{delegated.id}")' in content
    assert "Read ALL previous comments" in content
    assert f'reply_to_comment_id="{comment.id}"' in content
    assert "separated by ---" in content


def test_an_agent_comment_does_not_notify_its_author(delegated, ada, cyd):
    task_comment_create(task_id=delegated.id, actor=Actor.for_agent(ada), content="Started.", activity_id="act_1")
    assert comments_for(ada) == []
    [item] = comments_for(cyd)
    assert item.metadata["senderRole"] == "agent" and item.priority == Priority.NORMAL


def test_watchers_hear_about_comments_too(as_alice, ada, bea, cyd, bob):
    task = task_create(
        actor=as_alice,
        title="t",
        assignee_id=ada.id,
        reviewer_agent_id=bea.id,
        metadata={"watchers": [cyd.id]},
        start=False,
    )
    task_comment_create(task_id=task.id, actor=Actor.for_user(bob), content="hello")
    assert len(comments_for(cyd)) == 1


def test_the_agent_streak_counts_consecutive_agent_comments_at_the_end(delegated, ada, cyd, bob):
    task_comment_create(task_id=delegated.id, actor=Actor.for_agent(ada), content="one")
    task_comment_create(task_id=delegated.id, actor=Actor.for_agent(cyd), content="two")
    task_comment_create(task_id=delegated.id, actor=Actor.for_agent(ada), content="three")
    # Cyd's second notification merged into the first at enqueue; each row keeps its count.
    assert [(i.status, i.metadata["agentStreak"]) for i in comments_for(cyd)] == [("queued", 1), ("merged", 3)]
    last = items(ada, MailboxType.TASK_COMMENT)[-1]
    assert last.metadata["agentStreak"] == 2
    assert "last 2 comments in this thread are all from agents" in last.payload["content"]
    task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="humans again")
    assert items(ada, MailboxType.TASK_COMMENT)[-1].metadata["agentStreak"] == 0


def test_an_agents_only_thread_goes_quiet_for_agents_the_loop_runs_until_a_person_speaks(
    delegated, ada, cyd, bob, alice, team
):
    """Two agents answering each other's comments (a weak model replies whatever the
    streak's note says, an outside agent may comment in a loop) would spend without end:
    past AGENT_STREAK_QUIET agent comments in a row, agents the loop runs are not sent
    them (an outside watcher still is: it costs no model run); a person's comment wakes
    the thread."""
    from attention.toolbox import ToolContext, execute_tool
    from markus.agents.models import Agent
    from markus.agents.services import agent_create
    from markus.work.selectors import AGENT_STREAK_QUIET, quiet_note

    eve = agent_create(name="Eve", owner=alice, team=team, agent_id="eve", kind=Agent.Kind.EXTERNAL)[0]
    delegated.metadata = {"watchers": [eve.id]}
    delegated.save(update_fields=["metadata"])
    for n in range(AGENT_STREAK_QUIET):
        task_comment_create(task_id=delegated.id, actor=Actor.for_agent((ada, cyd)[n % 2]), content=f"reply {n}")
    told = {a.id: len(comments_for(a)) for a in (ada, cyd, eve)}

    assert quiet_note(TaskComment.objects.latest("created_at")) == {}
    last = task_comment_create(task_id=delegated.id, actor=Actor.for_agent(ada), content="and another thing, @cyd")
    assert quiet_note(last)["note"].startswith("Agents Markus runs were not sent this comment")

    assert len(comments_for(cyd)) == told["cyd"] and items(cyd, MailboxType.MENTION) == []
    assert len(comments_for(eve)) == told["eve"] + 1
    # The commenting agent's tool says so: it goes on only if a person asks.
    ok, said = execute_tool(
        ToolContext(agent_id=cyd.id, agent_name="Cyd", scenario="task_execution"),
        "task_comment",
        {"task_id": delegated.id, "content": "one more"},
    )
    assert ok and "Stop here unless a person asks" in json.loads(said)["note"]
    task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="Stop and ship it.")
    assert len(comments_for(ada)) == told["ada"] + 1 and len(comments_for(cyd)) == told["cyd"] + 1


def test_a_reply_must_belong_to_the_same_task(delegated, make_task, bob):
    other = make_task(title="other")
    foreign = task_comment_create(task_id=other.id, actor=Actor.for_user(bob), content="elsewhere")
    with pytest.raises(WorkError, match="is not a comment on this task"):
        task_comment_create(
            task_id=delegated.id, actor=Actor.for_user(bob), content="re", reply_to_comment_id=foreign.id
        )
    assert not TaskComment.objects.filter(task=delegated).exists()


def test_reads_return_the_parent_author_and_content(delegated, bob, ada):
    parent = task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="Which grammar? " * 30)
    reply = task_comment_create(
        task_id=delegated.id,
        actor=Actor.for_agent(ada),
        content="The new one.",
        reply_to_comment_id=parent.id,
        activity_id="act_42",
    )
    rows = task_comments(delegated)
    assert [r["id"] for r in rows] == [parent.id, reply.id]
    assert rows[0]["replyToAuthor"] is None and rows[0]["activityId"] is None
    assert rows[1]["replyToCommentId"] == parent.id
    assert rows[1]["replyToAuthor"] == "bob"
    assert rows[1]["replyToContent"] == parent.content[:200]
    assert rows[1]["authorName"] == "Ada" and rows[1]["activityId"] == "act_42"
    assert rows[1]["activityLogUrl"] == "/api/agents/ada/activity-logs?activityId=act_42"


def test_a_humans_comment_never_carries_an_activity_id(delegated, bob):
    comment = task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="hi", activity_id="act_x")
    assert comment.activity_id is None


def test_a_reply_notification_quotes_the_parent(delegated, bob, ada):
    parent = task_comment_create(task_id=delegated.id, actor=Actor.for_agent(ada), content="Done with part 1")
    task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="Great", reply_to_comment_id=parent.id)
    assert '(In reply to Ada: "Done with part 1")' in comments_for(ada)[-1].payload["content"]


def test_a_mention_by_name_or_id_sends_a_mention_item(delegated, bob, bea, alice, team):
    from markus.agents.services import agent_create

    dee = agent_create(name="Dee", owner=alice, team=team, agent_id="dee")[0]
    task_comment_create(
        task_id=delegated.id, actor=Actor.for_user(bob), content="@Bea Reviewer please look, and @dee too"
    )
    for agent in (bea, dee):
        [mention] = items(agent, MailboxType.MENTION)
        assert mention.payload["taskId"] == delegated.id
        assert mention.payload["summary"] == "bob mentioned you on task: Port the parser"
        assert "mentioned you in a comment" in mention.payload["content"]
        assert mention.metadata["commentId"]
        assert items(agent, MailboxType.TASK_COMMENT) == []


def test_a_mentioned_recipient_gets_the_mention_instead_of_the_comment(delegated, bob, ada):
    task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="@ada ping")
    assert len(items(ada, MailboxType.MENTION)) == 1
    assert comments_for(ada) == []


def test_mentions_only_reach_agents_the_author_may_address(delegated, bob, zed_and_token):
    task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="@zed are you there?")
    assert items(zed_and_token[0]) == []


def test_mention_matching_needs_a_whole_handle(ada, bea):
    assert mentioned_agents("mail me at x@ada.io or @adam", [ada]) == []
    assert mentioned_agents("@BEA reviewer and @ada.", [ada, bea]) == [bea, ada]


def test_the_reviewers_comments_during_review_notify_only_those_mentioned(delegated, ada, bea, cyd):
    force_status(delegated, TaskState.REVIEW)
    task_comment_create(task_id=delegated.id, actor=Actor.for_agent(bea), content="Looks odd")
    assert comments_for(ada) == [] and comments_for(cyd) == []
    task_comment_create(task_id=delegated.id, actor=Actor.for_agent(bea), content="@Cyd what was intended?")
    assert comments_for(ada) == []
    assert len(items(cyd, MailboxType.MENTION)) == 1


def test_a_human_reviewers_comments_during_review_are_suppressed_too(as_alice, alice, ada, cyd):
    task = task_create(
        actor=as_alice, title="t", assignee_id=ada.id, reviewer_user_id=alice.pk, metadata={"watchers": [cyd.id]}
    )
    task_transition(task_id=task.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(ada))
    task_comment_create(task_id=task.id, actor=as_alice, content="Hmm")
    assert comments_for(ada) == [] and comments_for(cyd) == []


def test_others_commenting_during_review_still_notify(delegated, bob, ada):
    force_status(delegated, TaskState.REVIEW)
    task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="Any news?")
    assert len(comments_for(ada)) == 1


def test_the_reviewer_outside_review_notifies_as_usual(delegated, bea, ada):
    task_comment_create(task_id=delegated.id, actor=Actor.for_agent(bea), content="Heads up")
    assert len(comments_for(ada)) == 1


def test_empty_comments_are_refused(delegated, bob):
    with pytest.raises(WorkError, match="content is required"):
        task_comment_create(task_id=delegated.id, actor=Actor.for_user(bob), content="  ")


def test_a_requirement_comment_notifies_the_agent_in_charge(cyd, bob, ada):
    requirement = requirement_create(actor=Actor.for_agent(cyd), title="Faster builds")
    comment = requirement_comment_create(
        requirement_id=requirement.id, actor=Actor.for_user(bob), content="How much faster? @ada thoughts?"
    )
    [item] = items(cyd, MailboxType.REQUIREMENT_COMMENT)
    assert item.payload["requirementId"] == requirement.id
    assert item.metadata["commentId"] == comment.id and item.metadata["senderRole"] == "user"
    assert f'requirement_get("{requirement.id}")' in item.payload["content"]
    assert "requirement_comment (reply_to_comment_id=" in item.payload["content"]
    [mention] = items(ada, MailboxType.MENTION)
    assert mention.payload["requirementId"] == requirement.id


def test_a_requirement_reply_must_belong_to_the_same_requirement(cyd, bob):
    first = requirement_create(actor=Actor.for_agent(cyd), title="one")
    second = requirement_create(actor=Actor.for_agent(cyd), title="two")
    parent = requirement_comment_create(requirement_id=first.id, actor=Actor.for_user(bob), content="a")
    with pytest.raises(WorkError, match="is not a comment on this requirement"):
        requirement_comment_create(
            requirement_id=second.id, actor=Actor.for_user(bob), content="b", reply_to_comment_id=parent.id
        )
