"""Nothing cut in silence (issue 37, point 6), in a real browser: a chat message longer
than the chat takes (``CHAT_TEXT_MAX_CHARS``, 32,000) is refused on the mind view and on
the chat page with a message saying the limit, and stays in the box whole; a task title
longer than 300 characters is refused the same way on /work, not cut.

alice owns agent ada."""

from __future__ import annotations

import pytest

from mailbox.models import MailboxItem
from markus.core.limits import CHAT_TEXT_MAX_CHARS
from markus.work.models import Task

from .test_browser_work_chat import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TOO_LONG = "x" * 40_000


@pytest.mark.parametrize("path", ["mind", "chat"])
def test_a_chat_message_over_the_limit_is_refused_with_the_limit_and_kept(daphne_server, browser, alice, agent, path):
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors)
    page.goto(f"{daphne_server.url}/agents/{agent.id}/{path}/")
    page.fill("#chat-text", TOO_LONG)
    page.click("#chat button[type=submit]")
    page.wait_for_selector("#chat-reply .chat-pair.failed")
    said = page.inner_text("#chat-reply .chat-pair.failed")
    assert f"{CHAT_TEXT_MAX_CHARS:,}" in said and "40,000" in said, said
    assert page.eval_on_selector("#chat-text", "el => el.value.length") == 40_000
    assert not MailboxItem.objects.filter(agent=agent).exists()


def test_a_task_title_over_300_is_refused_with_the_limit_not_cut(daphne_server, browser, alice, agent):
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors)
    page.goto(f"{daphne_server.url}/work")
    page.click("#new-task summary")
    assert "300" in page.inner_text("label[for=task-title]")
    page.fill("#task-title", "t" * 400)
    page.click("#new-task button[type=submit]")
    page.wait_for_selector("#work-error")
    assert "300" in page.inner_text("#work-error")
    assert not Task.objects.exists()
    assert page.eval_on_selector("#task-title", "el => el.value.length") == 400


def test_a_comment_over_its_limit_is_refused_with_the_limit_not_cut(daphne_server, browser, alice, agent):
    from markus.core.actors import Actor
    from markus.work.comment_services import MAX_COMMENT_LENGTH
    from markus.work.models import TaskComment
    from markus.work.services import task_create

    task = task_create(actor=Actor.for_user(alice), title="Notes", assignee_id=agent.id)
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors)
    page.goto(f"{daphne_server.url}/work?task={task.id}")
    assert f"{MAX_COMMENT_LENGTH:,}" in page.inner_text("#comment-limit")
    page.fill("#comment-text", "c" * (MAX_COMMENT_LENGTH + 5))
    page.click("#comment-form button[type=submit]")
    page.wait_for_selector("#work-error")
    assert str(MAX_COMMENT_LENGTH) in page.inner_text("#work-error")
    assert not TaskComment.objects.exists()
    assert page.eval_on_selector("#comment-text", "el => el.value.length") == MAX_COMMENT_LENGTH + 5
