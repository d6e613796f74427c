"""``{% load markus_demo %}``: ``{% demo_login as demo %}``, the demo's sign-in
(``manage.py demo``) for the sign-in page to name, while it works: the demo's team
exists, its admin's password is still the demo's, and the server is not in production
(``settings.PRODUCTION``). Hashing a password is slow on purpose, so the check runs
once per stored hash; a new password is a new hash, checked again."""

from __future__ import annotations

from django import template
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password

from markus.management.commands.demo import DEMO_PASSWORD, DEMO_TEAM, DEMO_USER

register = template.Library()

_still_demo: dict[str, bool] = {}  # a stored hash -> whether it is the demo's password


@register.simple_tag
def demo_login() -> dict[str, str] | None:
    if settings.PRODUCTION:
        return None
    admin = get_user_model().objects.filter(username=DEMO_USER, owned_teams__name=DEMO_TEAM).first()
    if admin is None:
        return None
    if admin.password not in _still_demo:
        _still_demo[admin.password] = check_password(DEMO_PASSWORD, admin.password)
    return {"username": DEMO_USER, "password": DEMO_PASSWORD} if _still_demo[admin.password] else None
