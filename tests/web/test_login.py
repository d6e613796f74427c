"""A teammate who is not staff signs in on the plain login page and reaches a mind view."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.django_db
def test_a_non_staff_teammate_signs_in_and_opens_the_mind_view(bob, agent):
    client = Client()
    page = client.get(f"/agents/{agent.id}/mind/")
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/")
    r = client.post("/accounts/login/", {"username": "bob", "password": "pw-bob", "next": f"/agents/{agent.id}/mind/"})
    assert r.status_code == 302 and r["Location"] == f"/agents/{agent.id}/mind/"
    assert client.get(f"/agents/{agent.id}/mind/").status_code == 200


@pytest.mark.django_db
def test_a_wrong_password_shows_the_form_again(bob):
    r = Client().post("/accounts/login/", {"username": "bob", "password": "nope"})
    assert r.status_code == 200 and b"didn't match" in r.content
