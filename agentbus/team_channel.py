"""The team's group channel (seed section 25.2): one group stream per team, its id
``group:<teamId>``, its members the team's running agents (``Agent.objects.running()``).

It is made with the team (``on_team_saved``), for teams that were there before by the
migration ``0002_team_channels``, and on first use (``team_channel_ensure``). Its
members are kept in step with the agents: created, removed (the member row goes with
the agent), moved to another team, started, resumed, paused, stopped
(``team_channel_sync_agent``, called from the model's signal and from the loop's
status change, which writes with an UPDATE and sends no signal). A paused or stopped
agent is no member: the channel is the running team talking.

The operator persona is the stream's sender (a null sender): nobody closes it through
a door (only a stream's sender may, and no caller of the API is the operator), and the
prefix ``group:`` is reserved (``services.stream_open`` refuses it as a chosen id), so
no one can take a team's id before the team does. Agents talk on it with the group
tools (``agent_send_group_message``; ``agent_list_group_chats`` lists it); every other
member gets the message in its mailbox as an ``a2a_message``.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Max

from markus.agents.models import Agent, Team

from . import selectors
from .models import INBOX_TOPIC, ConsumerCursor, Stream, StreamMember
from .services import CONTROL_CHARACTERS, TEAM_CHANNEL_PREFIX, _consume_for_mailbox


def team_channel_id(team_id: str) -> str:
    return f"{TEAM_CHANNEL_PREFIX}{team_id}"


def team_channel_topic(name: str) -> str:
    """The channel's topic names the team (``selectors.group_name`` reads it back), on
    one line as every topic (``services.check_label``)."""
    return (selectors.GROUP_TOPIC_PREFIX + CONTROL_CHARACTERS.sub(" ", name))[:200]


@transaction.atomic
def team_channel_ensure(team: Team) -> Stream:
    """The team's channel, made (or renamed) if needed, its members brought in step."""
    stream, created = Stream.objects.get_or_create(
        id=team_channel_id(team.id),
        defaults={"is_group": True, "sender": None, "topic": team_channel_topic(team.name)},
    )
    if not created and stream.topic != team_channel_topic(team.name):
        stream.topic = team_channel_topic(team.name)
        stream.save(update_fields=["topic"])
    _sync_members(stream.id, team.id)
    return stream


def _sync_members(stream_id: str, team_id: str) -> None:
    """Members := the team's running agents. A newcomer's bus inbox starts after the
    channel's history (its cursor moves past the last chunk, never back), so the
    history does not count as waiting for it; it reads the history on the page or
    with the stream's events."""
    wanted = set(Agent.objects.running().filter(team_id=team_id).values_list("id", flat=True))
    have = set(StreamMember.objects.filter(stream_id=stream_id).values_list("agent_id", flat=True))
    if have - wanted:
        StreamMember.objects.filter(stream_id=stream_id, agent_id__in=have - wanted).delete()
    joining = sorted(wanted - have)
    if not joining:
        return
    StreamMember.objects.bulk_create(
        [StreamMember(stream_id=stream_id, agent_id=a) for a in joining], ignore_conflicts=True
    )
    last = Stream.objects.filter(id=stream_id).aggregate(last=Max("chunks__position"))["last"]
    if last is not None:
        have_cursor = set(
            ConsumerCursor.objects.filter(agent_id__in=joining, topic=INBOX_TOPIC).values_list("agent_id", flat=True)
        )
        _consume_for_mailbox(joining, have_cursor, last)


@transaction.atomic
def team_channel_sync_agent(agent_id: str) -> None:
    """Bring one agent's channel membership in step with its row: a member of its own
    team's channel while it runs, of no other team's channel."""
    agent = Agent.objects.select_related("team").filter(id=agent_id).first()
    if agent is None:
        return  # removed: its member rows went with it
    own = team_channel_id(agent.team_id) if agent.team_id else None
    StreamMember.objects.filter(agent_id=agent_id, stream__id__startswith=TEAM_CHANNEL_PREFIX).exclude(
        stream_id=own
    ).filter(stream__sender__isnull=True).delete()
    if agent.team is not None:
        team_channel_ensure(agent.team)


def team_channel_close(team_id: str) -> None:
    """A removed team's channel goes with it (nobody may see it any more)."""
    Stream.objects.filter(id=team_channel_id(team_id), sender__isnull=True).delete()


# --------------------------------------------------------------------------- signals


def on_team_saved(sender: type[Team], *, instance: Team, raw: bool = False, **kwargs: Any) -> None:
    if not raw:
        team_channel_ensure(instance)


def on_team_deleted(sender: type[Team], *, instance: Team, **kwargs: Any) -> None:
    team_channel_close(instance.id)


# The fields whose change can change an agent's membership.
_MEMBERSHIP_FIELDS = frozenset({"team", "team_id", "kind", "status"})


def on_agent_saved(sender: type[Agent], *, instance: Agent, created: bool, raw: bool = False, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if raw or (fields is not None and not _MEMBERSHIP_FIELDS & set(fields)):
        return
    if created and instance.team_id is None:
        return  # nothing to join, nothing to leave
    team_channel_sync_agent(instance.id)
