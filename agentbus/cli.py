"""The two backends of the ``agentbus`` and ``agent`` commands: the local database,
or a hub over HTTP. Both answer the same JSON, so every subcommand means the same in
both modes (the seed's outage was a hub mode that wrapped everything but the inbox).

Local mode trusts the caller (whoever can run manage.py owns the database) and acts
as the agent named on the command line, like the agent's own token does in hub mode.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from argparse import ArgumentParser
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import async_to_sync
from django.core.management.base import CommandError
from rest_framework.utils.encoders import JSONEncoder

from markus.agents.api import agent_data
from markus.agents.models import Agent
from markus.core.errors import MarkusError
from markus.toolservers.services import attached_names
from markus.work.api import task_detail
from markus.work.models import Task

from . import selectors, services
from .hub import HubClient, HubError
from .waiting import inbox_wait, stream_request

_T = TypeVar("_T")

CLI_ACTOR = "cli"
HTTP_GRACE_SECONDS = 30.0


def dumps(data: Any) -> str:
    """One JSON object on one line, dates spelled as the API spells them."""
    return json.dumps(data, cls=JSONEncoder, ensure_ascii=False)


def parse_payload(raw: str) -> dict[str, Any]:
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise CommandError(f"--payload is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise CommandError("--payload must be a JSON object")
    return payload


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class LocalBus:
    def _agent(self, agent_id: str) -> Agent:
        agent = Agent.objects.filter(id=agent_id).first()
        if agent is None:
            raise CommandError(f"no such agent: {agent_id}")
        return agent

    def wait(self, agent_id: str, *, timeout: float, after_cursor: str | None, limit: int) -> dict[str, Any]:
        agent = self._agent(agent_id)
        return async_to_sync(inbox_wait)(
            agent_id=agent.id, after_cursor=after_cursor, timeout=timeout, limit=limit, ack=True, actor=CLI_ACTOR
        )

    def pending(self, agent_id: str) -> dict[str, Any]:
        agent = self._agent(agent_id)
        return {"agentId": agent.id, "pending": selectors.pending_count(agent.id)}

    def drain(self, agent_id: str, *, peek: bool, limit: int) -> dict[str, Any]:
        agent = self._agent(agent_id)
        return services.inbox_drain(agent_id=agent.id, peek=peek, limit=limit, actor=CLI_ACTOR)

    def open(
        self, sender: str, recipient: str, *, stream_id: str | None, topic: str | None, reply_to: str | None
    ) -> dict[str, Any]:
        stream = services.stream_open(
            sender=self._agent(sender),
            recipient=self._agent(recipient),
            stream_id=stream_id,
            topic=topic,
            reply_to=reply_to,
            actor=CLI_ACTOR,
        )
        return selectors.stream_data(stream)

    def append(self, stream_id: str, sender: str, *, payload: dict[str, Any], topic: str | None) -> dict[str, Any]:
        chunk = services.stream_append(
            stream_id=stream_id, sender=self._agent(sender), payload=payload, topic=topic, actor=CLI_ACTOR
        )
        return selectors.chunk_data(chunk)

    def close(self, stream_id: str, sender: str) -> dict[str, Any]:
        stream = services.stream_close(stream_id=stream_id, sender=self._agent(sender), actor=CLI_ACTOR)
        return selectors.stream_data(stream)

    def request(
        self, sender: str, recipient: str, *, payload: dict[str, Any], topic: str | None, timeout: float
    ) -> dict[str, Any]:
        return async_to_sync(stream_request)(
            sender=self._agent(sender),
            recipient=self._agent(recipient),
            payload=payload,
            topic=topic,
            timeout=timeout,
            actor=CLI_ACTOR,
        )

    def agent_show(self, agent_id: str) -> dict[str, Any]:
        agent = self._agent(agent_id)
        return {**agent_data(agent), "pending_inbox": selectors.pending_count(agent.id)}

    def agent_list(self, *, inbox: bool) -> dict[str, Any]:
        agents = list(Agent.objects.order_by("created_at", "id"))
        servers = attached_names([a.id for a in agents])
        rows = [agent_data(agent, servers[agent.id]) for agent in agents]
        if inbox:
            counts = selectors.pending_counts([a.id for a in agents])
            for row in rows:
                row["pending_inbox_count"] = counts[row["id"]]
        return {"agents": rows}

    def task_show(self, task_id: str) -> dict[str, Any]:
        task = Task.objects.filter(id=task_id).first()
        if task is None:
            raise CommandError(f"no such task: {task_id}")
        data = task_detail(task)
        data["pending_inbox"] = data.pop("pendingInbox", None)
        return data


class HubBus:
    def __init__(self, url: str, token: str | None) -> None:
        if not token:
            raise CommandError("hub mode needs a token: --token or MARKUS_TOKEN")
        try:
            self.client = HubClient(url, token)
        except HubError as exc:
            raise CommandError(str(exc)) from None

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return self.client.call(method, path, **kwargs)
        except HubError as exc:
            raise CommandError(str(exc)) from None

    def wait(self, agent_id: str, *, timeout: float, after_cursor: str | None, limit: int) -> dict[str, Any]:
        return self._call(
            "GET",
            f"/api/agents/{_q(agent_id)}/agentbus/inbox",
            query={"after_cursor": after_cursor, "timeout_seconds": timeout, "limit": limit},
            timeout=timeout + HTTP_GRACE_SECONDS,
        )

    def pending(self, agent_id: str) -> dict[str, Any]:
        return self._call("GET", f"/api/agents/{_q(agent_id)}/agentbus/pending")

    def drain(self, agent_id: str, *, peek: bool, limit: int) -> dict[str, Any]:
        return self._call("POST", f"/api/agents/{_q(agent_id)}/agentbus/drain", body={"peek": peek, "limit": limit})

    def open(
        self, sender: str, recipient: str, *, stream_id: str | None, topic: str | None, reply_to: str | None
    ) -> dict[str, Any]:
        body = {"sender": sender, "recipient": recipient, "streamId": stream_id, "topic": topic, "replyTo": reply_to}
        return self._call("POST", "/api/agentbus/streams", body={k: v for k, v in body.items() if v is not None})

    def append(self, stream_id: str, sender: str, *, payload: dict[str, Any], topic: str | None) -> dict[str, Any]:
        body = {"sender": sender, "payload": payload, **({"topic": topic} if topic else {})}
        return self._call("POST", f"/api/agentbus/streams/{_q(stream_id)}/append", body=body)

    def close(self, stream_id: str, sender: str) -> dict[str, Any]:
        return self._call("POST", f"/api/agentbus/streams/{_q(stream_id)}/close", body={"sender": sender})

    def request(
        self, sender: str, recipient: str, *, payload: dict[str, Any], topic: str | None, timeout: float
    ) -> dict[str, Any]:
        body = {
            "sender": sender,
            "recipient": recipient,
            "payload": payload,
            "timeoutSeconds": timeout,
            **({"topic": topic} if topic else {}),
        }
        return self._call("POST", "/api/agentbus/request", body=body, timeout=timeout + HTTP_GRACE_SECONDS)

    def agent_show(self, agent_id: str) -> dict[str, Any]:
        data = self._call("GET", f"/api/agents/{_q(agent_id)}/")
        data["pending_inbox"] = data.pop("pendingInbox", None)
        return data

    def agent_list(self, *, inbox: bool) -> dict[str, Any]:
        rows = self._call("GET", "/api/agents/", query={"inbox": 1} if inbox else None)
        for row in rows:
            if inbox:
                row["pending_inbox_count"] = row.pop("pendingInboxCount", None)
        return {"agents": rows}

    def task_show(self, task_id: str) -> dict[str, Any]:
        data = self._call("GET", f"/api/tasks/{_q(task_id)}/")
        data["pending_inbox"] = data.pop("pendingInbox", None)
        return data


def add_hub_arguments(parser: ArgumentParser) -> None:
    parser.add_argument("--hub", default=None, help="hub URL (default: $MARKUS_HUB_URL); local database if unset")
    parser.add_argument("--token", default=None, help="API token for hub mode (default: $MARKUS_TOKEN)")


def backend(options: dict[str, Any]) -> LocalBus | HubBus:
    url = options.get("hub") or os.environ.get("MARKUS_HUB_URL")
    if url:
        return HubBus(url, options.get("token") or os.environ.get("MARKUS_TOKEN"))
    return LocalBus()


def run(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Call a backend method; a refusal becomes a one-line CommandError."""
    try:
        return fn(*args, **kwargs)
    except MarkusError as exc:
        raise CommandError(" ".join(str(exc).split())) from None
