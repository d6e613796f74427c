"""In a real browser, as a person clicks it: a task filed on /work moves to review and
to completed on the open page without a reload; its review is answered on the page its
notification opens; a comment with a mention rings the mentioned person's bell; the
chat page keeps its history across a reload and shows a ``notify_user`` message live.
Each new page at phone width in dark mode, without a horizontal scroll. Screenshots in
test-output/. The agent's side (its transition to review, its notify_user message) is
set up through the services, as the loop would make it.

alice owns agent ada (team Core, bob a member)."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test import Client

from markus.agents.models import ChatMessage
from markus.agents.services import main_session
from markus.core.actors import Actor
from markus.core.events import agent_group, send_event_on_commit
from markus.work.models import Task, TaskState
from markus.work.services import task_transition
from notifications.models import UserNotification

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 10_000


def signed_in(browser, base: str, user, errors: list[str], **context):
    client = Client()
    client.force_login(user)
    ctx = browser.new_context(viewport=context.pop("viewport", {"width": 1200, "height": 900}), **context)
    ctx.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": base}])
    page = ctx.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    return page


def test_a_task_filed_on_work_moves_live_is_reviewed_from_its_notification_and_a_mention_rings(
    daphne_server, browser, alice, bob, agent, test_output
):
    base = daphne_server.url
    errors: list[str] = []
    page = signed_in(browser, base, alice, errors)
    page.goto(f"{base}/work")
    page.click("#new-task summary")
    page.fill("#task-title", "Write the release notes")
    page.fill("#task-description", "For **1.2**: the fixes and the new pages.")
    page.select_option("#task-assignee", agent.id)
    page.select_option("#task-reviewer", f"user:{alice.pk}")
    page.click("#new-task button[type=submit]")
    page.wait_for_url("**/work?task=*")
    task = Task.objects.get(title="Write the release notes")
    assert page.get_attribute("#task-status", "data-status") == TaskState.IN_PROGRESS
    page.wait_for_function("document.body.dataset.workLive === 'on'", timeout=TIMEOUT)
    page.evaluate("window.__stayed = true")  # gone if the page reloads

    # The agent submits it: the open page shows review, and the review box, by itself.
    task_transition(task_id=task.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(agent), note="Drafted.")
    page.wait_for_selector("#task-status[data-status=review]", timeout=TIMEOUT)
    assert page.evaluate("window.__stayed === true")
    page.screenshot(path=str(test_output / "work-task-review.png"), full_page=True)

    # The notification leads to the page where the review is answered.
    note = UserNotification.objects.get(user=alice, type="task_review")
    page.goto(f"{base}/notifications/{note.id}/open/")
    page.wait_for_selector(".approval-box")
    page.click(".approval-box button[value=approve]")
    page.wait_for_selector("#task-status[data-status=completed]", timeout=TIMEOUT)
    assert Task.objects.get(id=task.id).status == TaskState.COMPLETED

    # bob watches his home page; alice mentions him in a comment: his bell rings.
    bob_page = signed_in(browser, base, bob, errors)
    bob_page.goto(f"{base}/")
    bob_page.wait_for_selector("#bell[data-live=on]", timeout=TIMEOUT)
    assert bob_page.get_attribute("#bell-count", "data-unread") == "0"
    page.fill("#comment-text", "Thanks for the notes, @bob will publish them.")
    page.click("#comment-form button[type=submit]")
    page.wait_for_selector(".comment >> text=@bob will publish")
    bob_page.wait_for_selector("#bell-count[data-unread='1']", timeout=TIMEOUT)
    assert "review → completed by alice" in page.inner_text("#history").lower()
    assert errors == []


def test_the_chat_page_keeps_its_history_and_shows_a_notify_user_message_live(
    daphne_server, browser, alice, agent, test_output
):
    base = daphne_server.url
    errors: list[str] = []
    session = main_session(agent.id)
    ChatMessage.objects.create(session=session, role="user", content="Is the build green?", metadata={})
    ChatMessage.objects.create(session=session, role="assistant", content="Yes: **all** 212 tests pass.")
    page = signed_in(browser, base, alice, errors)
    page.goto(f"{base}/agents/{agent.id}/chat/")
    page.wait_for_selector(".msg-assistant strong >> text=all")
    page.reload()
    page.wait_for_selector(".msg-user >> text=Is the build green?")
    page.wait_for_selector("#chat-live[data-live=on]", timeout=TIMEOUT)

    # What notify_user stores and sends (markus.tools.human_tools.notify_user).
    with transaction.atomic():
        message = ChatMessage.objects.create(
            session=session,
            role="assistant",
            content="**Heads up**\n\nThe deploy is done.",
            metadata={"notifyUser": True},
        )
        send_event_on_commit(
            agent_group(agent.id),
            "chat:message",
            {"agentId": agent.id, "sessionId": session.id, "message": {"id": message.pk, "content": message.content}},
        )
    page.wait_for_selector(f"#msg-{message.pk}.msg-notify >> text=The deploy is done.", timeout=TIMEOUT)
    page.screenshot(path=str(test_output / "chat-page.png"), full_page=True)
    assert errors == []


@pytest.mark.parametrize("path", ["/work", "/approvals/", "/agents/ada/chat/", "TASK"])
def test_the_new_pages_fit_a_phone_in_the_dark(daphne_server, browser, alice, agent, test_output, path):
    base = daphne_server.url
    errors: list[str] = []
    if path == "TASK":
        from markus.work.services import task_create

        task = task_create(actor=Actor.for_user(alice), title="A task with a long title " * 3, assignee_id=agent.id)
        path = f"/work?task={task.id}"
    page = signed_in(browser, base, alice, errors, viewport={"width": 390, "height": 844}, color_scheme="dark")
    page.goto(base + path)
    wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
    name = path.strip("/").replace("/", "-").replace("?", "-").replace("=", "-") or "home"
    page.screenshot(path=str(test_output / f"phone-dark-{name[:40]}.png"), full_page=True)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert not wide, path
    assert background != "rgb(255, 255, 255)", background  # the dark palette applies
    assert errors == []
