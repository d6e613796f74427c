"""In a real browser: the favicon loads (no 404 on ``/favicon.ico`` or the icon), Retry
asks before it re-queues (dismissed: nothing happens; accepted: a copy is queued), a
finished chat offers no Retry, the heartbeat control queues a heartbeat, a daily report
reads as HTML, and signing out lands on our page with its "Sign in again" link.

alice owns agent ada; she signs in on the login page (``open_mind``).
"""

from __future__ import annotations

from datetime import date

import pytest
from django.utils import timezone

from attention.models import AgentActivity
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.reports.services import report_store

from .conftest import enqueue_chat
from .test_browser import open_mind

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def finished(item: MailboxItem, *, success: bool) -> None:
    now = timezone.now()
    MailboxItem.objects.filter(id=item.id).update(status=Status.COMPLETED, started_at=now, completed_at=now)
    AgentActivity.objects.create(
        agent_id=item.agent_id, mailbox_item_id=item.id, type="chat", label="answer", ended_at=now, success=success
    )


def test_favicon_retry_confirmation_heartbeat_report_and_sign_out(daphne_server, browser, alice, agent, test_output):
    answered = enqueue_chat(agent.id, "Is the build green?")
    finished(answered, success=True)
    failed = enqueue_chat(agent.id, "Deploy the fix")
    finished(failed, success=False)
    report_store(agent=agent, day=date(2026, 3, 10), content="## Done\n\n- **shipped** it", activity={})

    base = daphne_server.url
    errors: list[str] = []
    every_status: list[tuple[int, str]] = []
    page = open_mind(browser, base, agent, errors)
    page.on("response", lambda r: every_status.append((r.status, r.url)))

    # The icon the page links loads, and /favicon.ico leads to it.
    icon = page.evaluate("document.querySelector('link[rel=icon]').href")
    assert icon == f"{base}/static/web/favicon.svg"
    assert page.request.get(icon).status == 200
    assert page.request.get(f"{base}/favicon.ico").status == 200  # redirected to the SVG

    # A finished chat: no Retry. A failed one: Retry, which asks first.
    page.click(f"#item-{answered.id}-head")
    assert page.locator(f"#item-{answered.id}-detail .ctl-retry").count() == 0
    page.click(f"#item-{failed.id}-head")
    retry = page.locator(f"#item-{failed.id}-detail .ctl-retry")
    asked: list[str] = []

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    retry.click()
    page.wait_for_timeout(500)
    assert asked and "queued" in asked[0]
    assert not MailboxItem.objects.filter(metadata__retryOf=failed.id).exists()

    page.once("dialog", lambda dialog: dialog.accept())
    retry.click()
    page.locator("#mind-flash", has_text=f"{failed.id} retried as").wait_for(timeout=10_000)
    assert MailboxItem.objects.filter(metadata__retryOf=failed.id, status=Status.QUEUED).count() == 1

    # The heartbeat control.
    page.click("#mind-controls .ctl-heartbeat")
    page.locator("#mind-flash", has_text="Heartbeat queued").wait_for(timeout=10_000)
    assert MailboxItem.objects.filter(agent=agent, source_type=MailboxType.HEARTBEAT).count() == 1

    # The report, as HTML.
    report = page.locator("#mind-daily-reports .report-content")
    assert report.locator("strong", has_text="shipped").count() == 1
    assert "**" not in report.inner_text()
    page.screenshot(path=str(test_output / "mind-fixes.png"), full_page=True)

    # Sign out: our page, and back in from it.
    page.click(".signout button")
    page.locator("h1", has_text="Signed out").wait_for(timeout=10_000)
    assert page.locator(".topbar").is_visible()
    page.screenshot(path=str(test_output / "signed-out.png"), full_page=True)
    page.click("text=Sign in again")
    page.wait_for_url(f"{base}/accounts/login/")

    assert errors == []
    assert [s for s in every_status if s[0] >= 400] == []
    page.close()
