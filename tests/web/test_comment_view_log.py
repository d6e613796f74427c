"""An agent's comment on a task links to the activity that wrote it (issue 37, point 8):
"View log" opens that activity's log on the task page; a person's comment, or an
agent's with no activity, has none.

alice owns agent ada."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from attention.models import AgentActivity, AgentActivityLog
from markus.core.actors import Actor
from markus.work.comment_services import task_comment_create
from markus.work.services import task_create

pytestmark = pytest.mark.django_db


def test_an_agents_comment_has_a_view_log_of_its_activity(alice, agent):
    task = task_create(actor=Actor.for_user(alice), title="Notes", assignee_id=agent.id)
    activity = AgentActivity.objects.create(agent=agent, type="task", label="Working")
    AgentActivityLog.objects.create(activity=activity, seq=1, type="text", content="Read the changelog.")
    task_comment_create(task_id=task.id, actor=Actor.for_agent(agent), content="Drafted.", activity_id=activity.id)
    task_comment_create(task_id=task.id, actor=Actor.for_user(alice), content="Thanks.")
    client = Client()
    client.force_login(alice)
    html = client.get(f"/work?task={task.id}").content.decode()
    url = reverse("mind-activity-logs", args=[agent.id, activity.id])
    assert html.count("View log") == 1 and f'hx-get="{url}"' in html
    assert "Read the changelog." in client.get(url).content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_view_log_opens_the_log_on_the_task_page(daphne_server, browser, alice, agent):
    from .test_browser_work_chat import signed_in

    task = task_create(actor=Actor.for_user(alice), title="Notes", assignee_id=agent.id)
    activity = AgentActivity.objects.create(agent=agent, type="task", label="Working")
    AgentActivityLog.objects.create(activity=activity, seq=1, type="text", content="Read the changelog.")
    task_comment_create(task_id=task.id, actor=Actor.for_agent(agent), content="Drafted.", activity_id=activity.id)
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors)
    page.goto(f"{daphne_server.url}/work?task={task.id}")
    page.click(".comment-log summary")
    page.wait_for_selector(".comment-log-body .log-list")
    assert "Read the changelog." in page.inner_text(".comment-log-body")
