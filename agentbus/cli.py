"""The two backends of the ``agentbus`` and ``agent`` commands: the local database,
or a hub over HTTP. Both answer the same JSON, so every subcommand means the same in
both modes (the seed's outage was a hub mode that wrapped everything but the inbox).

Local mode trusts the caller (whoever can run manage.py owns the database) and acts
as the agent named on the command line, like the agent's own token does in hub mode.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.parse
from argparse import ArgumentParser
from collections.abc import Callable
from typing import Any, TypeVar

from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser, handle_default_options
from django.db import connections
from rest_framework.utils.encoders import JSONEncoder

from attention.stalls import stalls_of
from mailbox import idempotency
from markus.agents.api import agent_data
from markus.agents.models import Agent, Team
from markus.agents.services import agent_create, agent_token_revoke, agent_token_rotate
from markus.core.api import error_code
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


class CliError(CommandError):
    """A CLI error with a machine ``code`` (and, from a hub, its ``status``, ``detail``
    and ``fields``): printed on stderr as one JSON object by ``JsonCommand``. Still a
    CommandError, so ``call_command`` raises it as Django's commands do."""

    def __init__(self, message: str, *, code: str = "error", returncode: int = 1, **extra: Any) -> None:
        super().__init__(" ".join(str(message).split()), returncode=returncode)
        self.code = code
        self.extra = {key: value for key, value in extra.items() if value is not None}


def usage_error(message: str) -> CliError:
    return CliError(message, code="usage", returncode=2)


def error_json(exc: CommandError) -> str:
    """``{"error": <one line>, "code": ..., "status"?, "detail"?, "fields"?}``."""
    message = " ".join(str(exc).split()) or "error"
    if isinstance(exc, CliError):
        return dumps({"error": message, "code": exc.code, **exc.extra})
    if message.startswith("Error: "):  # the argument parser's own refusals
        return dumps({"error": message[len("Error: ") :], "code": "usage"})
    return dumps({"error": message, "code": "error"})


class JsonCommand(BaseCommand):
    """A command whose every error, from the command line, is one JSON object on stderr
    (``error_json``) with a non-zero exit (2 for bad arguments): a refusal, a hub's
    answer, an argument the parser refuses. Success output is the command's own.
    ``call_command`` still raises the CommandError (``--traceback`` too)."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # The parser (and its subparsers) raise CommandError instead of printing usage
        # text and exiting: run_from_argv prints it as JSON.
        called = bool(getattr(self, "_called_from_command_line", False))
        self._called_from_command_line = False
        try:
            return super().create_parser(prog_name, subcommand, **kwargs)
        finally:
            self._called_from_command_line = called

    def run_from_argv(self, argv: list[str]) -> None:
        self._called_from_command_line = True
        try:
            parser = self.create_parser(argv[0], argv[1])
            try:
                options = parser.parse_args(argv[2:])
            except CliError:
                raise
            except CommandError as exc:
                raise usage_error(str(exc).removeprefix("Error: ")) from None
            cmd_options = vars(options)
            args = cmd_options.pop("args", ())
            handle_default_options(options)
            self.execute(*args, **cmd_options)
        except CommandError as exc:
            if "--traceback" in argv:
                raise
            self.stderr.write(error_json(exc), style_func=lambda text: text)
            sys.exit(exc.returncode)
        finally:
            connections.close_all()


def parse_payload(raw: str) -> dict[str, Any]:
    try:
        payload = json.loads(raw)
    except ValueError as exc:
        raise CliError(f"--payload is not JSON: {exc}", code="invalid") from None
    if not isinstance(payload, dict):
        raise CliError("--payload must be a JSON object", code="invalid")
    return payload


def request_payload(text: str | None, raw: str | None) -> dict[str, Any]:
    """``request``'s payload: the TEXT argument as ``{"text": TEXT}``, or ``--payload``."""
    if text is not None and raw is not None:
        raise usage_error("give the message as TEXT or as --payload JSON, not both")
    if raw is not None:
        return parse_payload(raw)
    if text is None:
        raise usage_error('request needs the message: TEXT (sent as {"text": TEXT}) or --payload JSON')
    return {"text": text}


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class LocalBus:
    def _agent(self, agent_id: str) -> Agent:
        agent = Agent.objects.filter(id=agent_id).first()
        if agent is None:
            raise CliError(f"no such agent: {agent_id}", code="not_found")
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

    def append(
        self, stream_id: str, sender: str, *, payload: dict[str, Any], topic: str | None, key: str | None = None
    ) -> dict[str, Any]:
        chunk, _ = services.stream_append_once(
            stream_id=stream_id,
            sender=self._agent(sender),
            payload=payload,
            topic=topic,
            actor=CLI_ACTOR,
            request_key=idempotency.checked_key(key, "--idempotency-key"),
        )
        return selectors.chunk_data(chunk)

    def close(self, stream_id: str, sender: str) -> dict[str, Any]:
        stream = services.stream_close(stream_id=stream_id, sender=self._agent(sender), actor=CLI_ACTOR)
        return selectors.stream_data(stream)

    def request(
        self,
        sender: str,
        recipient: str,
        *,
        payload: dict[str, Any],
        topic: str | None,
        timeout: float,
        key: str | None = None,
    ) -> dict[str, Any]:
        result = async_to_sync(stream_request)(
            sender=self._agent(sender),
            recipient=self._agent(recipient),
            payload=payload,
            topic=topic,
            timeout=timeout,
            actor=CLI_ACTOR,
            request_key=idempotency.checked_key(key, "--idempotency-key"),
        )
        result.pop("replayed")  # as the hub's answer: a replay says so in a header only
        return result

    def agent_show(self, agent_id: str) -> dict[str, Any]:
        agent = self._agent(agent_id)
        return {**agent_data(agent), "pending_inbox": selectors.pending_count(agent.id)}

    def agent_list(self, *, inbox: bool) -> dict[str, Any]:
        agents = list(Agent.objects.order_by("created_at", "id"))
        servers = attached_names([a.id for a in agents])
        stalled = stalls_of([a.id for a in agents])
        rows = [agent_data(agent, servers[agent.id], stalled) for agent in agents]
        if inbox:
            counts = selectors.pending_counts([a.id for a in agents])
            for row in rows:
                row["pending_inbox_count"] = counts[row["id"]]
        return {"agents": rows}

    def agent_connect(
        self, name: str, *, role: str, team_id: str | None, agent_id: str | None, owner: str | None
    ) -> dict[str, Any]:
        team = Team.objects.filter(id=team_id).first() if team_id else None
        if team_id and team is None:
            raise CliError(f"no such team: {team_id}", code="not_found")
        user = User.objects.filter(username=owner).first() if owner else None
        if owner and user is None:
            raise CliError(f"no such user: {owner}", code="not_found")
        agent, token = agent_create(
            name=name, role=role, kind=Agent.Kind.EXTERNAL, agent_id=agent_id, team=team, owner=user
        )
        return {**agent_data(agent), "token": token}

    def agent_rotate_token(self, agent_id: str) -> dict[str, Any]:
        agent = self._agent(agent_id)
        return {**agent_data(agent), "token": agent_token_rotate(agent=agent)}

    def agent_revoke_token(self, agent_id: str) -> dict[str, Any]:
        agent_token_revoke(agent=self._agent(agent_id))
        return {"id": agent_id, "revoked": True}

    def task_show(self, task_id: str) -> dict[str, Any]:
        task = Task.objects.filter(id=task_id).first()
        if task is None:
            raise CliError(f"no such task: {task_id}", code="not_found")
        data = task_detail(task)
        data["pending_inbox"] = data.pop("pendingInbox", None)
        return data


class HubBus:
    def __init__(self, url: str, token: str | None) -> None:
        if not token:
            raise usage_error("hub mode needs a token: --token or MARKUS_TOKEN")
        try:
            self.client = HubClient(url, token)
        except HubError as exc:
            raise hub_error(exc) from None

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            return self.client.call(method, path, **kwargs)
        except HubError as exc:
            raise hub_error(exc) from None

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

    def append(
        self, stream_id: str, sender: str, *, payload: dict[str, Any], topic: str | None, key: str | None = None
    ) -> dict[str, Any]:
        body = {"sender": sender, "payload": payload, **({"topic": topic} if topic else {})}
        return self._call("POST", f"/api/agentbus/streams/{_q(stream_id)}/append", body=body, headers=_keyed(key))

    def close(self, stream_id: str, sender: str) -> dict[str, Any]:
        return self._call("POST", f"/api/agentbus/streams/{_q(stream_id)}/close", body={"sender": sender})

    def request(
        self,
        sender: str,
        recipient: str,
        *,
        payload: dict[str, Any],
        topic: str | None,
        timeout: float,
        key: str | None = None,
    ) -> dict[str, Any]:
        body = {
            "sender": sender,
            "recipient": recipient,
            "payload": payload,
            "timeoutSeconds": timeout,
            **({"topic": topic} if topic else {}),
        }
        return self._call(
            "POST", "/api/agentbus/request", body=body, timeout=timeout + HTTP_GRACE_SECONDS, headers=_keyed(key)
        )

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

    def agent_connect(
        self, name: str, *, role: str, team_id: str | None, agent_id: str | None, owner: str | None
    ) -> dict[str, Any]:
        if owner:
            raise usage_error("--owner is for the local database: a hub makes the token's user the owner")
        body = {"name": name, "role": role, "kind": Agent.Kind.EXTERNAL, "teamId": team_id, "id": agent_id}
        return self._call("POST", "/api/agents/", body={k: v for k, v in body.items() if v is not None})

    def agent_rotate_token(self, agent_id: str) -> dict[str, Any]:
        return self._call("POST", f"/api/agents/{_q(agent_id)}/token/rotate")

    def agent_revoke_token(self, agent_id: str) -> dict[str, Any]:
        self._call("DELETE", f"/api/agents/{_q(agent_id)}/token")
        return {"id": agent_id, "revoked": True}

    def task_show(self, task_id: str) -> dict[str, Any]:
        data = self._call("GET", f"/api/tasks/{_q(task_id)}/")
        data["pending_inbox"] = data.pop("pendingInbox", None)
        return data


def _keyed(key: str | None) -> dict[str, str]:
    """The ``Idempotency-Key`` header of a send (the hub checks its rule)."""
    return {idempotency.HEADER: key} if key is not None else {}


def add_hub_arguments(parser: ArgumentParser) -> None:
    parser.add_argument("--hub", default=None, help="hub URL (default: $MARKUS_HUB_URL); local database if unset")
    parser.add_argument("--token", default=None, help="API token for hub mode (default: $MARKUS_TOKEN)")


def backend(options: dict[str, Any]) -> LocalBus | HubBus:
    url = options.get("hub") or os.environ.get("MARKUS_HUB_URL")
    if url:
        return HubBus(url, options.get("token") or os.environ.get("MARKUS_TOKEN"))
    return LocalBus()


def hub_error(exc: HubError) -> CliError:
    returncode = 2 if exc.code == "usage" else 1
    return CliError(
        str(exc), code=exc.code, returncode=returncode, status=exc.status, detail=exc.detail, fields=exc.fields
    )


def run(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """Call a backend method; a refusal becomes a one-line CliError with the API's code
    (``invalid``, ``not_found``, ``conflict``…) and, for bad input, its ``fields``."""
    try:
        return fn(*args, **kwargs)
    except MarkusError as exc:
        fields = getattr(exc, "fields", None)
        raise CliError(str(exc), code=error_code(exc, exc.status_code), fields=fields) from None
