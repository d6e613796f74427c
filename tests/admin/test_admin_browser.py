"""The console in a real browser (system Chromium, Playwright, daphne in this
process): an operator signs in, opens an approval from the list (the admin's own
quoted link), answers it, and looks at the dashboard. Screenshots go to test-output/."""

from __future__ import annotations

import pytest

from notifications.models import Approval
from notifications.services import approval_create

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_operator_answers_an_approval_and_sees_the_dashboard(
    daphne_server,
    browser,
    test_output,
    django_user_model,
    alice,
    agent,
):
    django_user_model.objects.create_superuser("operator", "op@example.com", "pw-operator")
    approval = approval_create(user=alice, title="Deploy the release?", agent=agent)
    base = daphne_server.url
    errors: list[str] = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 500 else None)

    page.goto(f"{base}/admin/notifications/approval/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", "pw-operator")
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/admin/notifications/approval/")
    page.click("#result_list a:text('Deploy the release?')")
    page.locator(".object-tools a:text('Answer')").wait_for()
    page.screenshot(path=str(test_output / "admin-approval.png"), full_page=True)

    page.click(".object-tools a:text('Answer')")
    page.check("input[name=option][value=approve]")
    page.fill("textarea[name=comment]", "ship it")
    page.click("input[type=submit]")
    page.locator("ul.messagelist li.success").wait_for()
    approval.refresh_from_db()
    assert (approval.status, approval.selected_option, approval.comment) == (
        Approval.State.ANSWERED,
        "approve",
        "ship it",
    )

    page.goto(f"{base}/admin/dashboard/")
    page.locator(f'#agent-health tr[data-agent="{agent.id}"]').wait_for()
    page.screenshot(path=str(test_output / "admin-dashboard.png"), full_page=True)
    assert errors == []
