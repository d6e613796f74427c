"""Layouts that hold, in a real browser at a phone's width (390 px) and a desktop's
(1280 px): the mind view with a long chat history, a task's page with comments, /work
and the chat page. The facts asserted are the ones that broke (issue 37, point 5): no
horizontal scroll; the message box wide enough to write in, its Send button beside it
or directly under it; labels on one or two lines, not one word per line; buttons drawn
as buttons, not full-width grey bars. Screenshots go to the test's tmp dir.

alice owns agent ada (team Core)."""

from __future__ import annotations

import pytest

from markus.agents.models import ChatMessage
from markus.agents.services import main_session
from markus.core.actors import Actor
from markus.work.comment_services import task_comment_create
from markus.work.models import Task
from markus.work.services import task_create

from .test_browser_work_chat import signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = [390, 1280]
# The narrowest a message box may be and still be written in, at each width.
MIN_TEXTAREA_PX = {390: 220, 1280: 500}

# The boxes of the page's elements the assertions read, in CSS pixels.
BOXES = """(sel) => Array.from(document.querySelectorAll(sel)).map((el) => {
  const r = el.getBoundingClientRect(), s = getComputedStyle(el);
  return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height,
          line: parseFloat(s.lineHeight) || parseFloat(s.fontSize) * 1.4, text: el.innerText,
          background: s.backgroundColor, radius: parseFloat(s.borderTopLeftRadius) || 0};
})"""


def boxes(page, selector: str) -> list[dict]:
    found = page.evaluate(BOXES, selector)
    assert found, f"nothing matches {selector}"
    return found


def assert_no_horizontal_scroll(page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def assert_labels_hold(page, selector: str) -> None:
    """No label wraps one word per line: each takes at most two lines (and a short one, one)."""
    for label in boxes(page, selector):
        if label["height"] == 0:
            continue  # hidden
        lines = round(label["height"] / label["line"])
        assert lines <= 2, f"{label['text']!r} takes {lines} lines ({label['width']:.0f} px wide)"


def assert_compose_holds(page, textarea: str, button: str, width: int) -> None:
    """The message box is wide enough; Send is on its row or directly under it."""
    box, send = boxes(page, textarea)[0], boxes(page, button)[0]
    assert box["width"] >= MIN_TEXTAREA_PX[width], f"the message box is {box['width']:.0f} px wide"
    beside = send["top"] < box["bottom"] and send["left"] >= box["right"] - 1
    under = 0 <= send["top"] - box["bottom"] < 40 and send["left"] < box["left"] + box["width"] / 2
    assert beside or under, f"Send is at {send}, the box at {box}"


def assert_buttons_are_buttons(page, selector: str) -> None:
    """A submit button is not a full-width grey bar: narrower than its form, rounded."""
    for button in boxes(page, selector):
        if button["height"] == 0:
            continue
        form = page.evaluate(
            "(el) => el.closest('form').getBoundingClientRect().width",
            page.query_selector_all(selector)[0],
        )
        assert button["width"] < form * 0.8, f"{button['text']!r} is {button['width']:.0f} of {form:.0f} px"
        assert button["radius"] > 0, f"{button['text']!r} has square corners"


def shoot(page, path, name: str, width: int, part: str) -> None:
    """The whole page, and the part that broke on its own (a full page shrinks to a strip)."""
    page.screenshot(path=str(path / f"{name}-{width}.png"), full_page=True)
    page.locator(part).first.screenshot(path=str(path / f"{name}-{width}-part.png"))


def long_chat(agent) -> None:
    session = main_session(agent)
    for i in range(24):
        ChatMessage.objects.create(session=session, role="user", content=f"Question {i}: is the build green today?")
        ChatMessage.objects.create(
            session=session,
            role="assistant",
            content=f"Answer {i}: the build is green; the flaky login test passed twice in a row. " * 3,
        )


@pytest.mark.parametrize("width", WIDTHS)
def test_the_mind_views_chat_holds_with_a_long_history(daphne_server, browser, alice, agent, width, tmp_path):
    long_chat(agent)
    blocked = task_create(actor=Actor.for_user(alice), title="Publish the build " * 8, assignee_id=agent.id)
    Task.objects.filter(id=blocked.id).update(blocked_reason="its dependency failed: " + "x" * 150)
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors, viewport={"width": width, "height": 900})
    page.goto(f"{daphne_server.url}/agents/{agent.id}/mind/")
    page.wait_for_selector("#chat-recent")
    shoot(page, tmp_path, "mind", width, "#chat")
    shoot(page, tmp_path, "mind-tasks", width, "#mind-tasks")
    assert_no_horizontal_scroll(page)
    assert_compose_holds(page, "#chat-text", "#chat button[type=submit]", width)
    assert_labels_hold(page, "#chat label")
    assert_labels_hold(page, "#mind-tasks h3")
    # the open task, with why it cannot start, links to its page
    page.click(f"#mind-task-{blocked.id} a.task-link")
    page.wait_for_selector("#task-blocked-reason")
    assert not [e for e in errors if not e.startswith("404")], errors


@pytest.mark.parametrize("width", WIDTHS)
def test_the_chat_page_holds_with_a_long_history(daphne_server, browser, alice, agent, width, tmp_path):
    long_chat(agent)
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors, viewport={"width": width, "height": 900})
    page.goto(f"{daphne_server.url}/agents/{agent.id}/chat/")
    page.wait_for_selector("#chat-text")
    shoot(page, tmp_path, "chat", width, ".chat-compose")
    assert_no_horizontal_scroll(page)
    assert_compose_holds(page, "#chat-text", ".chat-compose button[type=submit]", width)
    assert_buttons_are_buttons(page, ".chat-compose button[type=submit]")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_task_page_with_comments_holds(daphne_server, browser, alice, agent, width, tmp_path):
    task = task_create(actor=Actor.for_user(alice), title="Write the release notes", assignee_id=agent.id)
    for i in range(6):
        task_comment_create(
            task_id=task.id,
            actor=Actor.for_agent(agent) if i % 2 else Actor.for_user(alice),
            content=f"Comment {i}: **the notes** cover the fixes and the new pages, with links to each change.",
        )
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors, viewport={"width": width, "height": 900})
    page.goto(f"{daphne_server.url}/work?task={task.id}")
    page.wait_for_selector("#comment-text")
    shoot(page, tmp_path, "task", width, "#task-" + task.id)
    assert_no_horizontal_scroll(page)
    assert_labels_hold(page, "#task-live label, #comment-form label")
    assert_compose_holds(page, "#comment-text", "#comment-form button[type=submit]", width)
    assert_buttons_are_buttons(page, "#comment-form button[type=submit]")


@pytest.mark.parametrize("width", WIDTHS)
def test_the_work_page_holds(daphne_server, browser, alice, agent, width, tmp_path):
    for i in range(5):
        task_create(actor=Actor.for_user(alice), title=f"Task {i}: a title long enough to wrap on a phone", start=False)
    errors: list[str] = []
    page = signed_in(browser, daphne_server.url, alice, errors, viewport={"width": width, "height": 900})
    page.goto(f"{daphne_server.url}/work")
    page.click("#new-task summary")
    page.wait_for_selector("#task-title")
    shoot(page, tmp_path, "work", width, "#new-work")
    assert_no_horizontal_scroll(page)
    assert_labels_hold(page, "#new-task label")
    assert_buttons_are_buttons(page, "#new-task button[type=submit]")
    marker = page.evaluate("getComputedStyle(document.querySelector('#new-task summary'), '::before').content")
    assert marker.isascii(), f"the disclosure marker {marker!r} needs a CJK font"
