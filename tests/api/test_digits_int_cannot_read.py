"""A number written with a digit Python's ``int`` cannot read ("³": ``isdigit()`` says
yes, ``int()`` says no) is refused like any other bad number, never a 500: a person's
id in the budget API, a page number, a number of days, a channel's sequence number.
Found by schemathesis (``PATCH /api/users/³/budget/``)."""

from __future__ import annotations

import pytest
from django.test import Client

from markus.agents.models import Team

pytestmark = pytest.mark.django_db

SUPERSCRIPT_THREE = "\u00b3"


@pytest.fixture
def root(django_user_model):
    return django_user_model.objects.create_user("root", password="pw-root", is_staff=True, is_superuser=True)


def test_the_budget_api_answers_404_for_a_person_id_in_such_digits(root):
    client = Client()
    client.force_login(root)
    url = f"/api/users/{SUPERSCRIPT_THREE}/budget/"
    assert client.get(url).status_code == 404
    assert client.patch(url, {"budget": {"dailyTokens": 5}}, content_type="application/json").status_code == 404


def test_pages_refuse_or_ignore_such_numbers(root):
    client = Client()
    client.force_login(root)
    team = Team.objects.create(name="Core", owner=root)
    for url in [
        f"/notifications/?page={SUPERSCRIPT_THREE}",
        f"/usage/?days={SUPERSCRIPT_THREE}",
        f"/teams/{team.pk}/channel/messages/?after={SUPERSCRIPT_THREE}",
    ]:
        assert client.get(url).status_code < 500, url
