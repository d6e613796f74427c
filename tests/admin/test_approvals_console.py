"""Approvals are answered in the console on behalf of the user who was asked: the
answer goes through approval_respond, so a parked item is re-queued."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.admin.utils import quote
from django.urls import reverse

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from notifications.models import Approval
from notifications.services import approval_create, approval_respond

pytestmark = pytest.mark.django_db


@pytest.fixture
def parked(agent, alice):
    """A chat parked while it waits for Alice's approval (as the loop leaves it)."""
    item = mailbox_enqueue(agent_id=agent.id, source_type=MailboxType.HUMAN_CHAT, payload={"summary": "deploy"})
    approval = approval_create(user=alice, title="Deploy?", agent=agent, mailbox_item=item)
    lifecycle.defer(item.id)
    MailboxItem.objects.filter(id=item.id).update(marks={"waitingForApproval": True, "approvalId": approval.id})
    return item, approval


def answer_url(approval) -> str:
    return reverse("admin:notifications_approval_answer", args=[quote(approval.pk)])


def test_the_change_page_and_the_list_link_to_the_answer_page(operator, parked):
    _, approval = parked
    url = answer_url(approval)
    assert (
        url in operator.get(reverse("admin:notifications_approval_change", args=[quote(approval.pk)])).content.decode()
    )
    assert url in operator.get(reverse("admin:notifications_approval_changelist")).content.decode()
    form = operator.get(url)
    assert form.status_code == 200 and b'value="approve"' in form.content


def test_answering_stores_the_answer_and_requeues_the_parked_item(operator, parked, alice):
    item, approval = parked
    response = operator.post(answer_url(approval), {"option": "approve", "comment": "ship it"})
    assert response.status_code == 302
    approval.refresh_from_db()
    assert (approval.status, approval.selected_option, approval.comment) == (
        Approval.State.ANSWERED,
        "approve",
        "ship it",
    )
    item.refresh_from_db()
    assert item.status == Status.QUEUED and "waitingForApproval" not in item.marks
    entry = LogEntry.objects.get(object_id=approval.pk)
    assert entry.user.username == "operator" and "on behalf of alice" in entry.get_change_message()


def test_an_answer_must_be_one_of_the_options(operator, parked):
    _, approval = parked
    response = operator.post(answer_url(approval), {"option": "maybe"})
    assert response.status_code == 200 and response.context["form"].errors
    response = operator.post(answer_url(approval), {})
    assert response.status_code == 200 and response.context["form"].errors
    approval.refresh_from_db()
    assert approval.status == Approval.State.PENDING


def test_a_freeform_answer_is_taken_when_the_approval_allows_it(operator, alice, agent):
    approval = approval_create(user=alice, title="Which region?", agent=agent, allow_freeform=True)
    operator.post(answer_url(approval), {"freeform": "eu-west-3"})
    approval.refresh_from_db()
    assert approval.selected_option == "eu-west-3"


def test_an_answered_approval_cannot_be_answered_again(operator, parked, alice):
    _, approval = parked
    approval_respond(user=alice, approval_id=approval.id, selected_option="reject")
    response = operator.post(answer_url(approval), {"option": "approve"})
    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.selected_option == "reject"
    page = operator.get(reverse("admin:notifications_approval_change", args=[quote(approval.pk)])).content.decode()
    assert answer_url(approval) not in page


def test_a_user_who_is_not_staff_cannot_answer_in_the_console(alice_browser, parked):
    _, approval = parked
    response = alice_browser.post(answer_url(approval), {"option": "approve"})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    approval.refresh_from_db()
    assert approval.status == Approval.State.PENDING
