"""Approvals: creation, listing and answering, heard by the receivers of approval_answered."""

from __future__ import annotations

import pytest

from markus.core.errors import ConflictError
from markus.core.signals import approval_answered, on
from notifications.models import Approval, UserNotification
from notifications.services import (
    approval_cancel,
    approval_create,
    approval_respond,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def approval(alice, agent):
    return approval_create(user=alice, title="Deploy to prod?", description="v2.1", agent=agent)


@pytest.fixture
def answered():
    seen = []

    def hook(approval):
        seen.append((approval.id, approval.selected_option, approval.comment))

    on(approval_answered, hook, "test.answered")
    on(approval_answered, hook, "test.answered")  # idempotent
    yield seen
    approval_answered.disconnect(dispatch_uid="test.answered")


def test_creating_an_approval_notifies_its_user(approval, alice):
    assert approval.status == "pending"
    assert [o["id"] for o in approval.options] == ["approve", "reject"]
    notification = UserNotification.objects.get(user=alice)
    assert notification.type == "approval_request" and notification.priority == "high"
    assert notification.metadata == {"approvalId": approval.id, "agentId": "ada"}


def test_the_pending_list_shows_only_the_callers_pending_approvals(alice_client, charlie_client, approval, alice):
    other = approval_create(user=alice, title="Old one")
    approval_respond(user=alice, approval_id=other.id, selected_option="reject")
    data = alice_client.get("/api/approvals?status=pending").json()
    assert [a["id"] for a in data["approvals"]] == [approval.id] and data["totalCount"] == 1
    assert data["approvals"][0]["options"][0] == {"id": "approve", "label": "Approve"}
    assert alice_client.get("/api/approvals").json()["totalCount"] == 2
    assert alice_client.get("/api/approvals?status=maybe").status_code == 400
    assert charlie_client.get("/api/approvals?status=pending").json()["totalCount"] == 0


def test_responding_stores_the_answer_runs_the_hooks_and_reads_the_notification(
    alice_client, approval, answered, alice
):
    response = alice_client.post(
        f"/api/approvals/{approval.id}/respond", {"selectedOption": "approve", "comment": "go"}, format="json"
    )
    assert response.status_code == 200
    data = response.json()
    assert data["status"] == "answered" and data["selectedOption"] == "approve" and data["comment"] == "go"
    assert answered == [(approval.id, "approve", "go")]
    assert UserNotification.objects.get(user=alice).read is True


def test_answering_twice_is_a_conflict(alice_client, approval, answered):
    alice_client.post(f"/api/approvals/{approval.id}/respond", {"selectedOption": "approve"}, format="json")
    again = alice_client.post(f"/api/approvals/{approval.id}/respond", {"selectedOption": "reject"}, format="json")
    assert again.status_code == 409
    assert len(answered) == 1 and Approval.objects.get(id=approval.id).selected_option == "approve"


def test_an_option_that_was_not_offered_is_a_400(alice_client, approval, answered):
    response = alice_client.post(f"/api/approvals/{approval.id}/respond", {"selectedOption": "maybe"}, format="json")
    assert response.status_code == 400 and "approve, reject" in response.json()["detail"]
    assert alice_client.post(f"/api/approvals/{approval.id}/respond", {}, format="json").status_code == 400
    assert answered == [] and Approval.objects.get(id=approval.id).status == "pending"


def test_a_freeform_approval_accepts_any_answer(alice):
    approval = approval_create(user=alice, title="Name it", options=[{"id": "a", "label": "A"}], allow_freeform=True)
    assert approval_respond(user=alice, approval_id=approval.id, selected_option="Zebra").selected_option == "Zebra"


def test_someone_elses_approval_answers_404(charlie_client, approval, answered):
    response = charlie_client.post(
        f"/api/approvals/{approval.id}/respond", {"selectedOption": "approve"}, format="json"
    )
    assert response.status_code == 404 and answered == []


def test_a_hook_that_fails_rolls_the_answer_back(alice, approval):
    def broken(approval):
        raise ConflictError("not now")

    on(approval_answered, broken, "test.broken")
    try:
        with pytest.raises(ConflictError):
            approval_respond(user=alice, approval_id=approval.id, selected_option="approve")
    finally:
        approval_answered.disconnect(dispatch_uid="test.broken")
    assert Approval.objects.get(id=approval.id).status == "pending"


def test_a_cancelled_approval_can_no_longer_be_answered(alice, approval):
    assert approval_cancel(approval_id=approval.id) is True
    assert approval_cancel(approval_id=approval.id) is False
    with pytest.raises(ConflictError, match="already cancelled"):
        approval_respond(user=alice, approval_id=approval.id, selected_option="approve")


def test_bad_options_are_refused(alice):
    from markus.core.errors import MarkusError

    with pytest.raises(MarkusError, match="duplicate option id"):
        approval_create(user=alice, title="x", options=[{"id": "a"}, {"id": "a"}])
    with pytest.raises(MarkusError, match="non-empty list"):
        approval_create(user=alice, title="x", options=[])
    with pytest.raises(MarkusError, match="at most 10 options, not 11"):
        approval_create(user=alice, title="x", options=[f"choice {n}" for n in range(11)])
    with pytest.raises(MarkusError, match="an option's label may have at most 200 characters"):
        approval_create(user=alice, title="x", options=["x" * 201])
    with pytest.raises(MarkusError, match="every option needs a string id"):
        approval_create(user=alice, title="x", options=["  ", 3])
    assert not Approval.objects.exists()


def test_options_written_as_labels_are_options_of_those_labels(alice):
    approval = approval_create(
        user=alice, title="Ship?", options=["Ship it", "Wait: a week", {"id": "no", "label": "No"}]
    )
    assert approval.options == [
        {"id": "ship_it", "label": "Ship it"},
        {"id": "wait_a_week", "label": "Wait: a week"},
        {"id": "no", "label": "No"},
    ]
    approval_respond(user=alice, approval_id=approval.id, selected_option="wait_a_week")
    approval.refresh_from_db()
    assert approval.selected_option == "wait_a_week"
