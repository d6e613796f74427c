"""A rejected requirement keeps its rejection reason (``rejectedReason``): on the API,
on its work page, in its history; resubmitting clears it. And a requirement moved to
the status it already has is a no-op, not a conflict."""

from __future__ import annotations

import pytest

from markus.core.actors import Actor
from markus.work.models import Requirement, RequirementState, StatusChange
from markus.work.services import (
    requirement_create,
    requirement_reject,
    requirement_resubmit,
    requirement_transition,
)
from notifications.models import UserNotification

from .conftest import items

pytestmark = pytest.mark.django_db
R = RequirementState


@pytest.fixture
def proposal(cyd):
    return requirement_create(actor=Actor.for_agent(cyd), title="Faster builds", description="CI takes 40 min.")


def test_a_rejected_requirement_keeps_its_reason(proposal, alice_client):
    response = alice_client.post(f"/api/requirements/{proposal.id}/reject", {"reason": "Too costly."}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["rejectedReason"] == "Too costly."
    assert Requirement.objects.get(id=proposal.id).rejected_reason == "Too costly."
    assert alice_client.get(f"/api/requirements/{proposal.id}/").json()["rejectedReason"] == "Too costly."


def test_a_requirement_never_rejected_has_no_reason(proposal, alice_client):
    assert alice_client.get(f"/api/requirements/{proposal.id}/").json()["rejectedReason"] is None


def test_resubmitting_clears_the_reason(proposal, as_alice, cyd):
    requirement_reject(requirement_id=proposal.id, actor=as_alice, reason="Too costly.")
    again = requirement_resubmit(requirement_id=proposal.id, actor=Actor.for_agent(cyd), description="Cheaper now.")
    assert again.status == R.PENDING and again.rejected_reason == ""


def test_the_work_page_shows_the_rejection_reason(proposal, as_alice, alice, client):
    client.force_login(alice)
    requirement_reject(requirement_id=proposal.id, actor=as_alice, reason="Not this quarter.")
    page = client.get(f"/work?requirement={proposal.id}")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Rejected because" in html and "Not this quarter." in html


def test_a_same_status_update_is_a_no_op(proposal, as_alice, cyd):
    before = StatusChange.objects.filter(entity_id=proposal.id).count()
    notes = UserNotification.objects.count()
    mail = len(items(cyd))
    same = requirement_transition(requirement_id=proposal.id, to_status=R.PENDING, actor=as_alice)
    assert same.status == R.PENDING
    assert StatusChange.objects.filter(entity_id=proposal.id).count() == before
    assert UserNotification.objects.count() == notes and len(items(cyd)) == mail


def test_a_same_status_step_on_the_api_answers_200(proposal, as_alice, alice_client):
    requirement_reject(requirement_id=proposal.id, actor=as_alice, reason="No.")
    response = alice_client.post(f"/api/requirements/{proposal.id}/reject", {"reason": "Still no."}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "rejected" and response.json()["rejectedReason"] == "No."
