"""In a real browser, at desktop width and on a 390 px phone: /work with more tasks than
a page holds says how many there are, filters them by state from its form, goes to page
2 with the filter kept, and its live refresh keeps the filter (a new task in another
state is not inserted; one in the state shown is). No horizontal scroll on the phone.
Screenshots in test-output/. alice owns ada (team Core)."""

from __future__ import annotations

import pytest

from markus.core.actors import Actor
from markus.web.listing import PER_PAGE
from markus.work.models import Task, TaskState
from markus.work.services import task_create, task_transition

from .test_browser_work_chat import TIMEOUT, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}


@pytest.mark.parametrize("width", list(WIDTHS))
def test_work_counts_filters_by_state_and_pages_with_the_filter_kept_live(
    daphne_server, browser, alice, agent, test_output, width
):
    Task.objects.bulk_create(
        Task(title=f"review {i}", created_by_user=alice, assignee=agent, status=TaskState.REVIEW)
        for i in range(PER_PAGE + 2)
    )
    Task.objects.bulk_create(Task(title=f"todo {i}", created_by_user=alice, assignee=agent) for i in range(20))
    base = daphne_server.url
    errors: list[str] = []
    page = signed_in(browser, base, alice, errors, viewport=WIDTHS[width])
    page.goto(f"{base}/work")
    assert page.get_attribute("#tasks-count", "data-count") == str(PER_PAGE + 22)
    assert page.inner_text("#tasks-count").startswith(f"{PER_PAGE + 22} tasks")

    page.select_option("#task-status-filter", TaskState.REVIEW)
    page.click("#task-filters button[type=submit]")
    page.wait_for_url("**/work?*status=review*")  # the form's empty fields ride along, unused
    assert page.inner_text("#tasks-count").startswith(f"{PER_PAGE + 2} tasks match")
    page.click("#tasks-pager a[rel=next]")
    page.wait_for_url("**/work?status=review&page=2")
    assert page.locator("#task-list tbody tr").count() == 2
    assert page.locator("#task-list [data-status]").evaluate_all("els => els.map(e => e.dataset.status)") == [
        "review",
        "review",
    ]
    assert page.input_value("#task-status-filter") == TaskState.REVIEW  # the form says what is shown
    page.wait_for_function("document.body.dataset.workLive === 'on'", timeout=TIMEOUT)
    wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
    page.screenshot(path=str(test_output / f"work-lists-page-2-{width}.png"), full_page=True)
    assert not wide

    # Live, on page 1 of the filter: a new pending task is not inserted, one sent to review is.
    page.click("#tasks-pager a[rel=prev]")
    page.wait_for_url("**/work?status=review")
    page.wait_for_function("document.body.dataset.workLive === 'on'", timeout=TIMEOUT)
    page.evaluate("window.__stayed = true")
    actor = Actor.for_user(alice)
    pending = task_create(actor=actor, title="Not for review", assignee_id=agent.id, start=False)
    shown = task_create(actor=actor, title="Ready for review", assignee_id=agent.id)
    task_transition(task_id=shown.id, to_status=TaskState.REVIEW, actor=Actor.for_agent(agent))
    page.wait_for_selector(f"#row-{shown.id}", timeout=TIMEOUT)
    assert page.locator(f"#row-{pending.id}").count() == 0
    assert page.inner_text("#tasks-count").startswith(f"{PER_PAGE + 3} tasks match")
    assert page.evaluate("window.__stayed === true") and page.url.endswith("/work?status=review")
    page.screenshot(path=str(test_output / f"work-lists-filtered-{width}.png"), full_page=True)
    assert errors == []


@pytest.mark.parametrize("width", list(WIDTHS))
def test_notifications_and_answered_approvals_page_and_filter_at_both_widths(
    daphne_server, browser, alice, agent, test_output, width
):
    from django.utils import timezone

    from markus.web.notification_pages import NOTIFICATIONS_PER_PAGE
    from markus.web.work_pages import ANSWERED_SHOWN
    from notifications.models import Approval, UserNotification

    UserNotification.objects.bulk_create(
        UserNotification(user=alice, type="system", title=f"Build {i} finished", read=bool(i % 2))
        for i in range(NOTIFICATIONS_PER_PAGE * 2)
    )
    Approval.objects.bulk_create(
        Approval(
            user=alice,
            agent=agent,
            title=f"Deploy {i}?",
            status="answered",
            selected_option="approve",
            answered_at=timezone.now(),
        )
        for i in range(ANSWERED_SHOWN + 1)
    )
    base = daphne_server.url
    errors: list[str] = []
    page = signed_in(browser, base, alice, errors, viewport=WIDTHS[width])
    page.goto(f"{base}/")
    page.click("#all-notifications-link")
    page.wait_for_url("**/notifications/")
    assert page.get_attribute("#notifications-count", "data-count") == str(NOTIFICATIONS_PER_PAGE * 2)
    page.select_option("#notification-filters select[name=read]", "unread")
    page.click("#notification-filters button[type=submit]")
    page.wait_for_url("**/notifications/?*read=unread*")
    assert page.inner_text("#notifications-count").startswith(f"{NOTIFICATIONS_PER_PAGE} notifications match")
    assert page.locator("#notification-list li.note.unread").count() == NOTIFICATIONS_PER_PAGE
    wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
    page.screenshot(path=str(test_output / f"notifications-list-{width}.png"), full_page=True)
    assert not wide

    page.goto(f"{base}/approvals/")
    assert page.inner_text("#answered-count").startswith(f"{ANSWERED_SHOWN + 1} answered")
    page.click("#answered-pager a[rel=next]")
    page.wait_for_url("**/approvals/?page=2")
    assert page.locator("#answered-approvals li[id^=answered-]").count() == 1
    wide = page.evaluate("document.documentElement.scrollWidth > document.documentElement.clientWidth")
    page.screenshot(path=str(test_output / f"approvals-answered-page-2-{width}.png"), full_page=True)
    assert not wide and errors == []
