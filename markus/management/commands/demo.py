"""``manage.py demo``: an admin user, a team and a few agents, and a demo git repository
with the reference git tool server (MCP) attached to the team (idempotent)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from markus.toolservers.models import ToolServer

# The demo's sign-in, named on the sign-in page while it works (markus.templatetags.markus_demo).
DEMO_USER = DEMO_PASSWORD = "admin"
DEMO_TEAM = "Demo"
DEMO_AGENTS = [
    ("ada", "Ada", "software engineer"),
    ("grace", "Grace", "reviewer"),
    ("linus", "Linus", "engineering manager"),  # a manager: writes a daily report after 20:00
]


class Command(BaseCommand):
    help = "Create the demo: user admin/admin, team Demo, agents ada, grace and linus."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        superuser = {"is_staff": True, "is_superuser": True}
        admin, created = User.objects.get_or_create(username=DEMO_USER, defaults=superuser)
        if created:
            admin.set_password(DEMO_PASSWORD)
            admin.save()
        team, _ = Team.objects.get_or_create(name=DEMO_TEAM, defaults={"owner": admin})
        for agent_id, name, role in DEMO_AGENTS:
            if not Agent.objects.filter(id=agent_id).exists():
                agent_create(name=name, role=role, agent_id=agent_id, team=team, owner=admin)
        self.stdout.write(self._git_server(team))
        self.stdout.write(
            "demo ready: sign in as admin / admin; agents: "
            + ", ".join(a for a, _, _ in DEMO_AGENTS)
            + "; watch one think at /agents/ada/mind/ (MARKUS_OFFLINE_THINK_MS sets how long each offline turn takes)"
        )

    def _git_server(self, team: Team) -> str:
        """The demo repository (var/demo-repo) and the ``git`` tool server on it, attached
        to the team: ask Ada "what is the last commit in the git repository?"."""
        command = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent)) or shutil.which(
            "mcp-server-git"
        )
        if command is None or shutil.which("git") is None:
            return "no git tool server: git or mcp-server-git is not installed"
        repo = Path(settings.DATA_DIR) / "demo-repo"
        if not (repo / ".git").exists():
            repo.mkdir(parents=True, exist_ok=True)
            who = ["-c", "user.name=Markus demo", "-c", "user.email=demo@markus.invalid"]
            steps = [
                ("README.md", "# Demo repository\n\nMade by `manage.py demo`.\n", "Start the demo repository"),
                ("NOTES.md", "- the agents read this repository through the git tool server\n", "Add notes"),
            ]
            subprocess.run(["git", "init", "-q", str(repo)], check=True)
            for name, text, subject in steps:
                (repo / name).write_text(text)
                subprocess.run(["git", *who, "-C", str(repo), "add", name], check=True)
                subprocess.run(["git", *who, "-C", str(repo), "commit", "-q", "-m", subject], check=True)
        server, _ = ToolServer.objects.get_or_create(
            name="git",
            defaults={
                "transport": "stdio",
                "command": command,
                "args": ["--repository", str(repo)],
                "description": f"the demo repository at {repo}",
            },
        )
        server.teams.add(team)
        return f"tool server git (mcp-server-git) on {repo}, attached to team {team.name}"
