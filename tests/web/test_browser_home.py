"""The home page in a real browser (the system Chromium, daphne in this process):
alice signs in from ``/``, lands back on it, sees her agent and its mind link, watches
a notification bump the bell live, and the pages fit a phone in the dark scheme.
Screenshots of home, agents, work and the 404 go under test-output/."""

from __future__ import annotations

import pytest

from markus.core.actors import Actor
from markus.work.comment_services import task_comment_create
from markus.work.services import task_create
from notifications.registry import NotificationType
from notifications.services import notify_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def watch_errors(page, errors: list[str]) -> None:
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on(
        "response",
        lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 and "/nope/" not in r.url else None,
    )


def test_sign_in_lands_home_the_bell_goes_live_and_links_work(daphne_server, browser, alice, agent, test_output):
    base = daphne_server.url
    task = task_create(actor=Actor.for_user(alice), title="Ship the release notes", assignee_id=agent.id)
    task_comment_create(task_id=task.id, actor=Actor.for_user(alice), content="Keep it short.")
    notify_user(
        user=alice, type=NotificationType.SYSTEM, title="Welcome", action_target={"path": f"/work?task={task.id}"}
    )
    errors: list[str] = []
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    watch_errors(page, errors)

    page.goto(f"{base}/")
    assert "/accounts/login/" in page.url
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    assert page.locator("#agent-ada .agent-name").inner_text() == "Ada"
    assert page.locator("#bell-count").get_attribute("data-unread") == "1"
    assert "Ship the release notes" in page.locator("#board").inner_text()

    # A notification arriving over the socket bumps the bell and joins the list.
    page.locator('#bell[data-live="on"]').wait_for(timeout=15_000)
    notify_user(user=alice, type=NotificationType.SYSTEM, title="Backup finished")
    page.locator('#bell-count[data-unread="2"]').wait_for(timeout=15_000)
    page.locator("#notifications", has_text="Backup finished").wait_for(timeout=15_000)
    page.screenshot(path=str(test_output / "home.png"), full_page=True)

    # Mark it read: the bell counts down.
    page.locator("#notifications .note", has_text="Backup finished").locator("button").click()
    page.locator('#bell-count[data-unread="1"]').wait_for(timeout=15_000)

    # The notification's link opens the task with its comments.
    page.click("#notifications a:text('Welcome')")
    page.wait_for_url(f"{base}/work?task={task.id}")
    assert "Keep it short." in page.locator(".comments").inner_text()

    page.goto(f"{base}/work")
    page.screenshot(path=str(test_output / "work.png"), full_page=True)
    page.goto(f"{base}/agents/")
    page.screenshot(path=str(test_output / "agents.png"), full_page=True)
    page.click("#agent-ada a.mind-link")
    page.wait_for_url(f"{base}/agents/ada/mind/")
    assert page.locator("#mind-header h1").inner_text() == "Ada"
    assert errors == []
    page.close()


def test_phone_in_the_dark_has_no_horizontal_scroll(daphne_server, browser, alice, agent, test_output):
    base = daphne_server.url
    for i in range(3):
        task_create(
            actor=Actor.for_user(alice), title=f"A task with a rather long title number {i}", assignee_id=agent.id
        )
    notify_user(user=alice, type=NotificationType.SYSTEM, title="A notification with a long title " * 3)
    context = browser.new_context(viewport={"width": 375, "height": 740}, color_scheme="dark")
    page = context.new_page()
    page.emulate_media(color_scheme="dark")
    page.goto(f"{base}/accounts/login/?next=/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "pw-alice")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")

    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    rgb = [int(v) for v in background[background.index("(") + 1 : background.index(")")].split(",")[:3]]
    assert sum(rgb) < 120, background  # the dark palette

    for path, shot in (("/", "home-phone-dark.png"), ("/agents/", None), ("/work", None), ("/nope/", "404.png")):
        response = page.goto(f"{base}{path}")
        assert response is not None
        assert response.status == (404 if path == "/nope/" else 200)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{path} scrolls sideways by {overflow}px"
        if shot:
            page.screenshot(path=str(test_output / shot), full_page=True)
    assert "Nothing here" in page.locator("main").inner_text()
    context.close()
