"""The sign-in page names the demo's login (issue 37, point 8) while it works: the demo
(``manage.py demo``: team Demo owned by admin) exists, admin's password is still the
demo's, and the server is not in production. Otherwise it says nothing of it."""

from __future__ import annotations

import pytest
from django.test import Client

from markus.agents.models import Team

pytestmark = pytest.mark.django_db

HINT = "Demo: sign in as <b>admin</b> / <b>admin</b>"


@pytest.fixture
def demo_admin(django_user_model):
    admin = django_user_model.objects.create_user("admin", password="admin")
    Team.objects.create(name="Demo", owner=admin)
    return admin


def login_page() -> str:
    return Client().get("/accounts/login/").content.decode()


def test_the_demo_login_is_named_while_it_works(demo_admin):
    assert HINT in login_page()


def test_no_hint_without_the_demo(django_user_model):
    django_user_model.objects.create_user("admin", password="admin")
    assert HINT not in login_page()


def test_no_hint_once_the_password_changed(demo_admin):
    assert HINT in login_page()
    demo_admin.set_password("a better one")
    demo_admin.save()
    assert HINT not in login_page()


def test_no_hint_in_production(demo_admin, settings):
    settings.PRODUCTION = True
    assert HINT not in login_page()
