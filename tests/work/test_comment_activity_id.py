"""The activity an agent's comment links to (``activityId``) is one of the commenting
agent's own: another agent's (zed's, of charlie's team) or one that does not exist is
a 400 naming the field, answered alike, and nothing is stored. A person's comment
carries no activity."""

from __future__ import annotations

import pytest

from attention.models import AgentActivity
from markus.core.actors import Actor
from markus.work.models import RequirementComment, TaskComment
from markus.work.requirement_services import requirement_create

from .conftest import agent_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(make_task):
    return make_task(title="Write the report", start=True)


@pytest.fixture
def requirement(bea):
    return requirement_create(actor=Actor.for_agent(bea), title="Lint rules")


def activity_of(agent) -> AgentActivity:
    return AgentActivity.objects.create(agent=agent, type="task", label="Working")


def comments_url(kind: str, obj) -> str:
    return f"/api/{kind}s/{obj.id}/comments"


@pytest.fixture(params=["task", "requirement"])
def target(request, task, requirement):
    return request.param, task if request.param == "task" else requirement


def test_an_agent_comment_keeps_its_own_activity_id(target, bea_and_token):
    kind, obj = target
    own = activity_of(bea_and_token[0])
    response = agent_client(bea_and_token[1]).post(
        comments_url(kind, obj), {"content": "Reviewing", "activityId": own.id}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["activityId"] == own.id


@pytest.mark.parametrize("whose", ["another team's", "nobody's"])
def test_an_activity_id_not_the_commenting_agents_is_400_naming_the_field(target, bea_and_token, zed_and_token, whose):
    kind, obj = target
    activity_id = activity_of(zed_and_token[0]).id if whose == "another team's" else "act_nope"
    response = agent_client(bea_and_token[1]).post(
        comments_url(kind, obj), {"content": "Reviewing", "activityId": activity_id}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["detail"] == f"activityId {activity_id!r} is not an activity of yours"
    assert not TaskComment.objects.exists() and not RequirementComment.objects.exists()


def test_a_persons_comment_carries_no_activity(target, alice_client, zed_and_token):
    kind, obj = target
    foreign = activity_of(zed_and_token[0])
    response = alice_client.post(comments_url(kind, obj), {"content": "Why?", "activityId": foreign.id}, format="json")
    assert response.status_code == 201 and response.json()["activityId"] is None
