"""Every team that was there before has its group channel (``agentbus.team_channel``):
the stream ``group:<teamId>``, its members the team's running agents. New teams get
theirs when they are made."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def make_team_channels(apps: Any, schema_editor: Any) -> None:
    Team = apps.get_model("agents", "Team")
    Agent = apps.get_model("agents", "Agent")
    Stream = apps.get_model("agentbus", "Stream")
    StreamMember = apps.get_model("agentbus", "StreamMember")
    for team in Team.objects.all():
        stream, _ = Stream.objects.get_or_create(
            id=f"group:{team.id}", defaults={"is_group": True, "sender": None, "topic": f"group:{team.name}"[:200]}
        )
        running = Agent.objects.filter(team_id=team.id, kind="internal", status="running").values_list("id", flat=True)
        StreamMember.objects.bulk_create(
            [StreamMember(stream_id=stream.id, agent_id=agent_id) for agent_id in running], ignore_conflicts=True
        )


class Migration(migrations.Migration):
    dependencies = [
        ("agentbus", "0001_initial"),
        ("agents", "0004_agent_heartbeat_rhythm"),
    ]

    operations = [migrations.RunPython(make_team_channels, migrations.RunPython.noop)]
