"""Signing out lands on a page of our own (not Django's stock "Logged out" page), and
every page has a favicon: ``/favicon.ico`` answers instead of a 404."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_sign_out_lands_on_our_page_with_a_sign_in_again_link(alice):
    client = Client()
    client.force_login(alice)
    response = client.post("/accounts/logout/", follow=True)
    assert response.status_code == 200
    html = response.content.decode()
    # Not the admin's stock page ("Thanks for spending some quality time…", "Log in again").
    assert "quality time" not in html and "Log in again" not in html
    assert "Django administration" not in html
    # Ours: the top bar of every page, our stylesheet, a heading and the link back in.
    assert 'class="topbar"' in html and "/static/web/web.css" in html
    assert "Signed out" in html
    assert 'href="/accounts/login/"' in html and "Sign in again" in html
    # And the session is gone: the mind of any agent asks to sign in again.
    assert "_auth_user_id" not in client.session
    assert client.get("/agents/").status_code == 302


def test_the_sign_out_page_does_not_offer_sign_out(alice):
    client = Client()
    client.force_login(alice)
    html = client.post("/accounts/logout/", follow=True).content.decode()
    assert 'action="/accounts/logout/"' not in html
    assert "alice" not in html


def test_favicon_ico_answers_with_the_svg_icon():
    client = Client()
    response = client.get("/favicon.ico")
    assert response.status_code in (301, 302)
    assert response["Location"] == "/static/web/favicon.svg"
    icon = client.get(response["Location"])
    assert icon.status_code == 200
    assert icon["Content-Type"].startswith("image/svg+xml")
    assert b"<svg" in b"".join(icon.streaming_content) if icon.streaming else b"<svg" in icon.content


def test_every_page_links_the_favicon(alice):
    client = Client()
    login = client.get("/accounts/login/").content.decode()
    assert '<link rel="icon" href="/static/web/favicon.svg" type="image/svg+xml">' in login
    client.force_login(alice)
    home = client.get("/").content.decode()
    assert 'href="/static/web/favicon.svg"' in home
    assert 'href="data:,"' not in home


def test_the_admins_log_out_lands_on_the_same_page(django_user_model):
    root = django_user_model.objects.create_superuser("root", password="pw-root")
    client = Client()
    client.force_login(root)
    response = client.post("/admin/logout/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Signed out" in html and "Sign in again" in html and "quality time" not in html
