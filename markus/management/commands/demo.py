"""``manage.py demo``: an admin user, a team and a few agents (idempotent)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from markus.agents.models import Agent, Team
from markus.agents.services import agent_create

DEMO_AGENTS = [
    ("ada", "Ada", "software engineer"),
    ("grace", "Grace", "reviewer"),
    ("linus", "Linus", "engineering manager"),  # a manager: writes a daily report after 20:00
]


class Command(BaseCommand):
    help = "Create the demo: user admin/admin, team Demo, agents ada, grace and linus."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        admin, created = User.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        if created:
            admin.set_password("admin")
            admin.save()
        team, _ = Team.objects.get_or_create(name="Demo", defaults={"owner": admin})
        for agent_id, name, role in DEMO_AGENTS:
            if not Agent.objects.filter(id=agent_id).exists():
                agent_create(name=name, role=role, agent_id=agent_id, team=team, owner=admin)
        self.stdout.write(
            "demo ready: sign in as admin / admin; agents: "
            + ", ".join(a for a, _, _ in DEMO_AGENTS)
            + "; watch one think at /agents/ada/mind/ (MARKUS_OFFLINE_THINK_MS sets how long each offline turn takes)"
        )
