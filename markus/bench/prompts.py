"""Prompt size: what the attention loop sends the model, per scenario, and what an idle
agent's day costs in model calls.

Everything is measured at the model seam only: a capturing provider
(``CapturingProvider``, installed with ``set_provider_override``) records each
``complete(system=, messages=, tools=, context=)`` call the loop makes, so the figures
stay right however the prompts are built behind it.

Steps:

1. A demo-like agent in the configured database: an owner, a team, a colleague, a role,
   working memory, MEMORY.md sections and observations, ``BACKGROUND_ITEMS`` queued
   items of the lowest priority (they stay queued and show in every prompt's mailbox),
   and the reference git tool server (``mcp-server-git``, over stdio, on a scratch git
   repository) attached as ``manage.py demo`` attaches it. If the server cannot be
   started the output says so loudly and the figures lack its tools.
2. For each scenario an item type runs (``SCENARIOS``), one item of that type is made
   through the product's services (chat and system items with ``mailbox_enqueue``,
   tasks, comments, reviews and requirements with the work services, an agent's
   message through the agent bus, the heartbeat as the schedule enqueues it) and the
   loop runs for the agent in this thread (``attention.loop.run_attention``, one item a
   run) until the item was begun. The first request of each scenario is measured. The
   deliberation comes last: two items of one priority tie for the head. Whatever else
   an item's making queued (a status notice) is dropped before the loop runs, so every
   prompt sees the same mailbox: the background items.
3. The chat's first turn is answered with a call of a harmless read tool it is offered
   (``PROBE_TOOLS``), so a second request of the same item follows; "shared prefix" is
   the share of the second request, serialized as system + tools + messages in that
   order, that is identical to the first's serialized the same way (what a prompt cache
   can reuse).
4. An idle agent's day: ``--n`` (48) heartbeats every 30 minutes, each enqueued as the
   schedule does (``attention.heartbeat``) and run through the loop, nothing new in
   between: the model calls they make and their estimated prompt tokens. The first of
   them sees what the scenarios did since the last heartbeat.

Characters: the system prompt's length; the tool schemas and the messages as
``json.dumps`` of the list with separators ``(",", ":")``. Estimated tokens: all three
divided by ``CHARS_PER_TOKEN`` (4 characters a token): an estimate, not a tokenizer.
The agents, their items, the tasks, the requirement, the tool server and the scratch
repository are deleted at the end, whatever happened.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mailbox.registry import MailboxType as T
from markus.bench.report import Figure
from markus.llm.base import CallContext, LLMResponse, Provider, ToolCall, Usage

if TYPE_CHECKING:
    from _typeshed import SupportsWrite
    from django.contrib.auth.models import User

    from mailbox.models import MailboxItem
    from markus.agents.models import Agent

SUITE = "prompts"
DEFAULT_N = 48  # heartbeats in an idle agent's day: one every 30 minutes
HEARTBEAT_MINUTES = 30
CHARS_PER_TOKEN = 4
BACKGROUND_ITEMS = 3
SERVER_NAME = "bench-git"  # the reference git tool server, as the bench registers it
# Read tools the chat's first turn may call to get a second turn (the first offered).
PROBE_TOOLS = ("check_mailbox", "recall_activity")
PROBE_SCENARIO = "chat"
DELIBERATION = "deliberation"
TRIAGE = "triage"
# Runs of the loop an item may take before it is begun (items ahead of it, a wait).
MAX_RUNS = 10
# The scenarios measured, in order: (scenario name, the item that runs it); MAKERS make the items.
SCENARIOS: list[tuple[str, str]] = [
    ("chat", T.HUMAN_CHAT.value),
    ("task_execution", f"{T.TASK_STATUS_UPDATE.value} (execution)"),
    ("comment_response", T.TASK_COMMENT.value),
    ("mention_response", T.MENTION.value),
    ("review", T.REVIEW_REQUEST.value),
    ("session_response", T.SESSION_REPLY.value),
    ("requirement_action", f"{T.REQUIREMENT_UPDATE.value} (action)"),
    ("a2a", T.A2A_MESSAGE.value),
    ("system_notice", T.SYSTEM_EVENT.value),
    ("check_in", T.HEARTBEAT.value),
    ("daily_report_writing", T.DAILY_REPORT.value),
    ("dream_cycle", T.MEMORY_CONSOLIDATION.value),
    ("reminder_due", T.REMINDER.value),
    (DELIBERATION, "2 items tied for the head"),
]


# ---------------------------------------------------------------------------- the capturing brain


def dumps(value: Any) -> str:
    """How tool schemas and messages are counted: compact JSON."""
    return json.dumps(value, separators=(",", ":"))


@dataclass
class Request:
    """One ``complete`` call as the provider received it."""

    scenario: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    item_id: str = ""

    @property
    def tool_names(self) -> list[str]:
        return [str((t.get("function") or {}).get("name") or t.get("name") or "") for t in self.tools]

    @property
    def tool_chars(self) -> int:
        return len(dumps(self.tools))

    @property
    def system_chars(self) -> int:
        return len(self.system)

    @property
    def message_chars(self) -> int:
        return len(dumps(self.messages))

    @property
    def chars(self) -> int:
        return self.tool_chars + self.system_chars + self.message_chars

    @property
    def tokens(self) -> float:
        return self.chars / CHARS_PER_TOKEN

    def serialized(self) -> str:
        """System, tools, messages, in that order: the prefix a prompt cache sees."""
        return self.system + dumps(self.tools) + dumps(self.messages)


def _known_marker() -> str:
    """The text a final answer ends with where a scenario asks for it, wherever the
    product defines it now ("" if nowhere: then it is read from the prompt)."""
    for module in ("markus.llm.base", "markus.llm", "attention.scenarios", "attention.tool_loop"):
        with contextlib.suppress(ImportError):
            value = getattr(importlib.import_module(module), "COMPLETION_MARKER", None)
            if isinstance(value, str) and value:
                return value
    return ""


_MARKER_IN_PROMPT = re.compile(r"<<[A-Z_]+>>")


class CapturingProvider(Provider):
    """Records every call; answers "Done." (with the completion marker, which the loop
    strips, so an item is not tried again for the want of it), no tool calls. A
    deliberation is ended with ``complete_deliberation`` choosing the first candidate
    (a mini triage with JSON naming it); the chat's first turn calls a read tool
    (``probe``) once, so its item makes a second request."""

    name = "capturing"
    local = True

    def __init__(self, probe_tools: tuple[str, ...] = PROBE_TOOLS) -> None:
        self.requests: list[Request] = []
        self.probe_tools = probe_tools
        self.probed = ""  # the read tool the chat's first turn called
        self.marker = _known_marker()
        self._lock = threading.Lock()

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        item = context.item or {}
        request = Request(context.scenario, system, copy.deepcopy(messages), copy.deepcopy(tools), str(item.get("id")))
        with self._lock:
            self.requests.append(request)
            n = len(self.requests)
        usage = Usage(prompt_tokens=round(request.tokens), completion_tokens=3)
        candidates = [c for c in item.get("candidates") or [] if isinstance(c, dict) and c.get("id")]
        first = str(candidates[0]["id"]) if candidates else str(item.get("id") or "")
        if context.scenario == DELIBERATION and "complete_deliberation" in request.tool_names:
            decision = {"process_item_id": first, "reasoning": "The first one listed goes first."}
            return LLMResponse(tool_calls=[ToolCall(f"call_{n}", "complete_deliberation", decision)], usage=usage)
        if context.scenario == TRIAGE:
            return LLMResponse(text=json.dumps({"processItemId": first, "reasoning": "first"}), usage=usage)
        if context.scenario == PROBE_SCENARIO and not self.probed:
            probe = next((t for t in self.probe_tools if t in request.tool_names), None)
            if probe is not None:
                self.probed = probe
                return LLMResponse(tool_calls=[ToolCall(f"call_{n}", probe, {})], usage=usage)
        marker = self.marker
        if not marker:
            found = _MARKER_IN_PROMPT.search(system)
            marker = found.group(0) if found else ""
        return LLMResponse(text=f"Done. {marker}".strip(), usage=usage)

    def first(self, scenario: str) -> Request | None:
        return next((r for r in self.requests if r.scenario == scenario), None)

    def of_item(self, item_id: str) -> list[Request]:
        return [r for r in self.requests if r.item_id == item_id]


@contextlib.contextmanager
def installed(provider: Provider) -> Iterator[Provider]:
    """The provider for this process while the block runs; the one before it afterwards."""
    from markus.llm import base

    previous = getattr(base, "_override", None)
    base.set_provider_override(provider)
    try:
        yield provider
    finally:
        base.set_provider_override(previous)


# ---------------------------------------------------------------------------- the agent and its world


@dataclass
class World:
    """What the bench made; deleted at the end."""

    tag: str
    owner: User
    agent: Agent
    colleague: Agent
    repo: Path | None = None
    server_tools: int = 0
    server_note: str = ""
    background: list[str] = field(default_factory=list)
    task_ids: list[str] = field(default_factory=list)
    requirement_ids: list[str] = field(default_factory=list)
    team_id: str = ""


WORKING_MEMORY = [
    ("current_focus", "Finishing the CSV export for the billing team; the parser handles quoted fields now."),
    ("open_questions", "Ask Grace whether the export needs the legacy date format (she owns the importer)."),
    ("commitments", "Promised the owner a status note on the export by Friday noon."),
]
LONGTERM = [
    ("Preferences", "- The owner wants short status notes, bullets first\n- Reviews before noon when possible"),
    ("Project facts", "- Billing exports run nightly at 02:00 UTC\n- The importer rejects files over 50 MB"),
]
OBSERVATIONS = [
    "Grace prefers review requests with a one-line summary of the change",
    "The nightly export failed twice last week on files with a BOM",
    "The owner asked to be told before any schema change",
    "Large CSVs import faster when split into 10k-row chunks",
]
BACKGROUND = [
    "Dependency audit: 2 minor updates available",
    "Disk usage on the build runner at 71%",
    "Weekly metrics digest is ready",
]


def _scratch_repo() -> Path:
    repo = Path(tempfile.mkdtemp(prefix="markus-bench-repo-"))
    who = ["-c", "user.name=Markus bench", "-c", "user.email=bench@markus.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for name, text, subject in [
        ("README.md", "# Bench repository\n\nMade by `manage.py bench prompts`.\n", "Start the bench repository"),
        ("NOTES.md", "- the agents read this repository through the git tool server\n", "Add notes"),
    ]:
        (repo / name).write_text(text)
        subprocess.run(["git", *who, "-C", str(repo), "add", name], check=True)
        subprocess.run(["git", *who, "-C", str(repo), "commit", "-q", "-m", subject], check=True)
    return repo


def _attach_git_server(world: World) -> None:
    """The reference git tool server on a scratch repository, attached to the agent, its
    tools listed now (so a failure to start it is known before anything is measured)."""
    from markus.toolservers import offered
    from markus.toolservers.models import ServerState, ToolServer
    from markus.toolservers.services import attach, server_create

    command = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent)) or shutil.which("mcp-server-git")
    if command is None or shutil.which("git") is None:
        world.server_note = "git or mcp-server-git is not installed"
        return
    world.repo = _scratch_repo()
    ToolServer.objects.filter(name=SERVER_NAME).delete()  # a crashed run's
    server = server_create(
        {
            "name": SERVER_NAME,
            "transport": "stdio",
            "command": command,
            "args": ["--repository", str(world.repo)],
            "description": "the bench's scratch repository",
        },
        owner=None,
    )
    attach(world.agent, [SERVER_NAME], by=None)
    tools = offered.refresh(server)
    server.refresh_from_db()
    world.server_tools = len(tools)
    if server.state != ServerState.READY or not tools:
        world.server_note = f"it did not list its tools: {server.last_error or 'no tools'}"


def _build(tag: str) -> World:
    from django.contrib.auth.models import User

    from mailbox.registry import Priority
    from mailbox.services import mailbox_enqueue
    from markus.agents import memory as working_memory
    from markus.agents.models import Agent, Team
    from markus.agents.services import agent_create
    from markus.memory.services import memory_save, section_write

    owner = User.objects.create_user(f"bench-prompts-{tag}")
    team = Team.objects.create(name=f"Bench prompts {tag}", owner=owner)
    try:
        agent, _ = agent_create(
            name="Ada", role="software engineer", owner=owner, team=team, agent_id=f"bench-prompts-{tag}-ada"
        )
        colleague, _ = agent_create(
            name="Grace", role="reviewer", owner=owner, team=team, agent_id=f"bench-prompts-{tag}-grace"
        )
    except Exception:
        Agent.objects.filter(id__startswith=f"bench-prompts-{tag}-").delete()
        team.delete()
        owner.delete()
        raise
    Agent.objects.filter(id=agent.id).update(heartbeat_interval_minutes=HEARTBEAT_MINUTES)
    world = World(tag=tag, owner=owner, agent=agent, colleague=colleague, team_id=team.id)
    try:
        for key, content in WORKING_MEMORY:
            working_memory.remember(agent.id, key, content)
        for title, content in LONGTERM:
            section_write(agent_id=agent.id, title=title, content=content)
        for text in OBSERVATIONS:
            memory_save(agent_id=agent.id, content=text)
        for summary in BACKGROUND[:BACKGROUND_ITEMS]:
            item = mailbox_enqueue(
                agent_id=agent.id,
                source_type=T.SYSTEM_EVENT,
                payload={"summary": summary, "content": summary},
                priority=int(Priority.BACKGROUND),
                metadata={"senderRole": "system"},
            )
            world.background.append(item.id)
    except Exception:
        _teardown(world)
        raise
    return world


def _teardown(world: World) -> None:
    from django.contrib.auth.models import User

    from markus.agents.models import Agent, Team
    from markus.toolservers.models import ToolServer
    from markus.toolservers.runtime import runtime
    from markus.work.models import Requirement, Task

    with contextlib.suppress(Exception):
        runtime().forget(SERVER_NAME)  # stops the stdio server
    ToolServer.objects.filter(name=SERVER_NAME).delete()
    ids = [world.agent.id, world.colleague.id]
    Agent.objects.filter(id__in=ids).update(status=Agent.RunStatus.STOPPED)
    Task.objects.filter(id__in=world.task_ids).delete()
    Requirement.objects.filter(id__in=world.requirement_ids).delete()
    Agent.objects.filter(id__in=ids).delete()
    Team.objects.filter(id=world.team_id).delete()
    User.objects.filter(pk=world.owner.pk).delete()
    if world.repo is not None:
        shutil.rmtree(world.repo, ignore_errors=True)


# ---------------------------------------------------------------------------- running the loop


def _open_ids(agent_id: str) -> set[str]:
    from mailbox.lifecycle import OPEN_STATUSES
    from mailbox.models import MailboxItem

    return set(MailboxItem.objects.filter(agent_id=agent_id, status__in=OPEN_STATUSES).values_list("id", flat=True))


def _clear(world: World, keep: set[str]) -> int:
    """Drop the agent's open items but the background and ``keep``: every prompt sees
    the same mailbox. Returns how many were dropped."""
    from mailbox import lifecycle

    keep = keep | set(world.background)
    dropped = 0
    for item_id in _open_ids(world.agent.id) - keep:
        dropped += bool(lifecycle.drop(item_id, reason="bench prompts: not measured"))
    return dropped


def _run_until_begun(world: World, item_id: str) -> str:
    """Run the loop, one item a run, until the item was begun; whatever of it is left
    (an item to try again) is dropped. Returns the item's status then."""
    from attention import loop
    from mailbox.lifecycle import OPEN_STATUSES
    from mailbox.models import MailboxItem
    from mailbox.registry import Status

    for _ in range(MAX_RUNS):
        item = MailboxItem.objects.get(id=item_id)
        if item.status != Status.QUEUED or item.started_at is not None:
            break
        loop.run_attention(world.agent.id, budget=1)
    item = MailboxItem.objects.get(id=item_id)
    status = str(item.status)
    if status in OPEN_STATUSES:
        _clear(world, keep=set())
        status += " (dropped afterwards)"
    _clear(world, keep=set())
    return status


# ---------------------------------------------------------------------------- the items


def _human(world: World) -> Any:
    from markus.core.actors import Actor

    return Actor.for_user(world.owner)


def _newest(agent_id: str, before: set[str], source_type: str, **where: Any) -> MailboxItem:
    from mailbox.models import MailboxItem

    rows = MailboxItem.objects.filter(agent_id=agent_id, source_type=source_type, **where).exclude(id__in=before)
    item = rows.order_by("-queued_at", "-id").first()
    if item is None:
        raise RuntimeError(f"no {source_type} item was enqueued for the agent")
    return item


def _make_chat(world: World) -> MailboxItem:
    from mailbox.services import mailbox_enqueue

    text = "Hi Ada, where are we with the CSV export? Anything blocking you?"
    return mailbox_enqueue(
        agent_id=world.agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": text[:120], "content": text},
        metadata={"senderRole": "user", "senderId": str(world.owner.pk), "senderName": world.owner.username},
    )


def _own_task(world: World) -> str:
    return world.task_ids[0]


def _make_execution(world: World) -> MailboxItem:
    from markus.work.services import task_create

    before = _open_ids(world.agent.id)
    task = task_create(
        actor=_human(world),
        title="Add quoted-field support to the CSV export",
        description=(
            "The billing export breaks on fields that contain commas. Quote such fields as RFC 4180 says, "
            "add a test with a quoted comma and a quoted quote, and note the change in the changelog."
        ),
        assignee_id=world.agent.id,
        reviewer_agent_id=world.colleague.id,
    )
    world.task_ids.append(task.id)
    return _newest(world.agent.id, before, T.TASK_STATUS_UPDATE, payload__taskId=task.id)


def _make_comment(world: World) -> MailboxItem:
    from markus.work.comment_services import task_comment_create

    before = _open_ids(world.agent.id)
    task_comment_create(
        task_id=_own_task(world),
        actor=_human(world),
        content="Please keep the old unquoted output behind a flag: the importer of another team still reads it.",
    )
    return _newest(world.agent.id, before, T.TASK_COMMENT)


def _colleague_task(world: World) -> str:
    from markus.work.services import task_create

    if len(world.task_ids) < 2:
        task = task_create(
            actor=_human(world),
            title="Make the importer accept quoted fields",
            description="The importer must read what the new CSV export writes (RFC 4180 quoting).",
            assignee_id=world.colleague.id,
            reviewer_agent_id=world.agent.id,
        )
        world.task_ids.append(task.id)
    return world.task_ids[1]


def _make_mention(world: World) -> MailboxItem:
    from markus.work.comment_services import task_comment_create

    task_id = _colleague_task(world)
    before = _open_ids(world.agent.id)
    task_comment_create(
        task_id=task_id,
        actor=_human(world),
        content="@Ada does the export already quote fields with line breaks? Grace needs to know for the importer.",
    )
    return _newest(world.agent.id, before, T.MENTION)


def _make_review(world: World) -> MailboxItem:
    from markus.core.actors import Actor
    from markus.work.services import task_transition

    task_id = _colleague_task(world)
    before = _open_ids(world.agent.id)
    task_transition(
        task_id=task_id,
        to_status="review",
        actor=Actor.for_agent(world.colleague),
        note="The importer reads RFC 4180 quoting now; tests cover commas, quotes and line breaks.",
    )
    return _newest(world.agent.id, before, T.REVIEW_REQUEST)


def _make_session_reply(world: World) -> MailboxItem:
    from markus.core.actors import Actor
    from markus.work.comment_services import task_comment_create
    from markus.work.services import task_transition

    task_id = _own_task(world)
    task_transition(
        task_id=task_id, to_status="review", actor=Actor.for_agent(world.agent), note="Quoted fields are in."
    )
    task_transition(task_id=task_id, to_status="completed", actor=Actor.for_agent(world.colleague), note="Looks good.")
    before = _open_ids(world.agent.id)
    task_comment_create(
        task_id=task_id,
        actor=_human(world),
        content="Thanks! Did the changelog entry make it in, and which version will carry it?",
    )
    return _newest(world.agent.id, before, T.SESSION_REPLY)


def _make_requirement_action(world: World) -> MailboxItem:
    from markus.core.actors import Actor
    from markus.work.requirement_services import requirement_approve, requirement_create

    requirement = requirement_create(
        actor=Actor.for_agent(world.agent),
        title="Stream large CSV exports instead of building them in memory",
        description="Exports over 50 MB run out of memory on the worker; write them row by row to storage.",
    )
    world.requirement_ids.append(requirement.id)
    before = _open_ids(world.agent.id)
    requirement_approve(requirement_id=requirement.id, actor=_human(world), reason="Yes, this hurts every night.")
    return _newest(world.agent.id, before, T.REQUIREMENT_UPDATE, payload__requirementId=requirement.id)


def _make_a2a(world: World) -> MailboxItem:
    from agentbus.services import send_agent_message

    before = _open_ids(world.agent.id)
    send_agent_message(
        sender=world.colleague,
        recipient=world.agent,
        text="Quick one: does the export write a BOM at the start of the file? The importer chokes on it.",
        topic="CSV export",
    )
    return _newest(world.agent.id, before, T.A2A_MESSAGE)


def _make_system_event(world: World) -> MailboxItem:
    from mailbox.services import mailbox_enqueue

    text = "The nightly billing export finished with 3 warnings (rows skipped: 0)."
    return mailbox_enqueue(
        agent_id=world.agent.id,
        source_type=T.SYSTEM_EVENT,
        payload={"summary": "Nightly billing export finished with warnings", "content": text},
        metadata={"senderRole": "system"},
    )


def _make_heartbeat(world: World) -> MailboxItem:
    """A heartbeat as the schedule enqueues it (``attention.heartbeat``): its period
    claimed for this agent alone (the tick would look at every running agent)."""
    from django.utils import timezone

    from attention import heartbeat
    from mailbox.services import mailbox_enqueue
    from markus.agents.models import Agent

    agent = Agent.objects.get(id=world.agent.id)
    before = _open_ids(agent.id)
    beat = getattr(heartbeat, "_beat", None)
    if beat is not None:
        beat(agent, timezone.now())
        return _newest(agent.id, before, T.HEARTBEAT)
    return mailbox_enqueue(  # the schedule's own enqueue moved: its summary, a plain period
        agent_id=agent.id,
        source_type=T.HEARTBEAT,
        payload={"summary": heartbeat.SUMMARY, "content": heartbeat.SUMMARY, "extra": {"period": uuid.uuid4().hex}},
        metadata={"senderRole": "system"},
    )


def _make_daily_report(world: World) -> MailboxItem:
    from django.utils import timezone

    from attention.selectors import day_activity
    from mailbox.services import mailbox_enqueue
    from markus.reports.clock import local_day_bounds, local_now
    from markus.reports.services import report_request

    now = timezone.now()
    day = local_now(world.agent, now).date()
    start, _ = local_day_bounds(world.agent, day)
    return mailbox_enqueue(
        agent_id=world.agent.id,
        source_type=T.DAILY_REPORT,
        payload=report_request(world.agent, day, now, day_activity(world.agent.id, start, now)),
        metadata={"senderRole": "system"},
    )


def _make_dream(world: World) -> MailboxItem:
    """A dream as the dream check enqueues it, one priority up from the background
    items' (the lowest), so it does not tie with them."""
    from django.utils import timezone

    from mailbox.registry import Priority
    from mailbox.services import mailbox_enqueue
    from markus.memory.dream import dream_listing

    content, listed, through = dream_listing(world.agent.id)
    return mailbox_enqueue(
        agent_id=world.agent.id,
        source_type=T.MEMORY_CONSOLIDATION,
        payload={
            "summary": f"Dream cycle: consolidate memory ({listed} new observations)",
            "content": content,
            "extra": {
                "period": timezone.localdate().isoformat(),
                "newObservations": listed,
                "listed": listed,
                "throughObservation": through,
            },
        },
        priority=int(Priority.LOW),
        metadata={"senderRole": "system"},
    )


def _make_reminder(world: World) -> MailboxItem:
    from django.utils import timezone

    from mailbox.services import mailbox_enqueue

    text = "Send the owner the status note on the CSV export"
    now = timezone.now()
    return mailbox_enqueue(
        agent_id=world.agent.id,
        source_type=T.REMINDER,
        payload={
            "summary": text,
            "content": text,
            "extra": {"remindAt": now.isoformat(), "scheduledAt": (now - timedelta(hours=2)).isoformat()},
        },
        metadata={"senderRole": "user", "senderId": str(world.owner.pk), "senderName": world.owner.username},
    )


def _make_deliberation(world: World) -> MailboxItem:
    """Two system events of one priority: they tie for the head, the loop deliberates."""
    from mailbox.services import mailbox_enqueue

    first = None
    for summary in ("Certificate of the export bucket expires in 9 days", "Export job queue is 40 minutes behind"):
        item = mailbox_enqueue(
            agent_id=world.agent.id,
            source_type=T.SYSTEM_EVENT,
            payload={"summary": summary, "content": summary},
            metadata={"senderRole": "system"},
        )
        first = first or item
    assert first is not None
    return first


MAKERS: dict[str, Callable[[World], MailboxItem]] = {
    "chat": _make_chat,
    "task_execution": _make_execution,
    "comment_response": _make_comment,
    "mention_response": _make_mention,
    "review": _make_review,
    "session_response": _make_session_reply,
    "requirement_action": _make_requirement_action,
    "a2a": _make_a2a,
    "system_notice": _make_system_event,
    "check_in": _make_heartbeat,
    "daily_report_writing": _make_daily_report,
    "dream_cycle": _make_dream,
    "reminder_due": _make_reminder,
    DELIBERATION: _make_deliberation,
}


# ---------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    scenario: str
    item_type: str
    request: Request | None
    note: str = ""


def _scenarios(world: World, provider: CapturingProvider, stdout: SupportsWrite[str]) -> list[Measured]:
    out = []
    for scenario, item_type in SCENARIOS:
        note = ""
        try:
            _clear(world, keep=set())
            item = MAKERS[scenario](world)
            tied = {item.id} | (_open_ids(world.agent.id) if scenario == DELIBERATION else set())
            _clear(world, keep=tied)  # what the making queued besides (a status notice)
            status = _run_until_begun(world, item.id)  # (the deliberation's other item is dropped)
            note = f"item {status}"
        except Exception as exc:  # one scenario's trouble must not cost the others theirs
            note = f"NOT MEASURED: {type(exc).__name__}: {exc}"
            stdout.write(f"prompts: {scenario}: {note}\n")
            with contextlib.suppress(Exception):
                _clear(world, keep=set())
        out.append(Measured(scenario, item_type, provider.first(scenario), note))
    return out


def _shared_chars(first: str, second: str) -> int:
    """How many characters ``first`` and ``second`` share from the start."""
    n, limit = 0, min(len(first), len(second))
    while n < limit and first[n] == second[n]:
        n += 1
    return n


def _idle_day(world: World, provider: CapturingProvider, heartbeats: int) -> tuple[int, float, int]:
    """``heartbeats`` heartbeats, each run through the loop, nothing new in between:
    (model calls, their estimated prompt tokens, heartbeats that called the model)."""
    _clear(world, keep=set())
    start = len(provider.requests)
    woke = 0
    for _ in range(heartbeats):
        calls = len(provider.requests)
        item = _make_heartbeat(world)
        _run_until_begun(world, item.id)
        woke += len(provider.requests) > calls
    day = provider.requests[start:]
    return len(day), sum(r.tokens for r in day), woke


def _table(rows: list[Measured]) -> list[str]:
    header = ("scenario", "tools", "tool chars", "system chars", "message chars", "est. tokens")
    cells = []
    for m in rows:
        r = m.request
        if r is None:
            cells.append((m.scenario, "-", "-", "-", "-", "-"))
            continue
        cells.append(
            (
                m.scenario,
                str(len(r.tools)),
                str(r.tool_chars),
                str(r.system_chars),
                str(r.message_chars),
                f"{r.tokens:.0f}",
            )
        )
    widths = [max(len(c[i]) for c in [header, *cells]) for i in range(len(header))]

    def line(c: tuple[str, ...]) -> str:
        return " | ".join([c[0].ljust(widths[0]), *(c[i].rjust(widths[i]) for i in range(1, len(c)))])

    return [line(header), "-+-".join("-" * w for w in widths), *(line(c) for c in cells)]


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    from django.db import connection

    from .mailbox import quiet_wakeups

    heartbeats = max(1, min(options.get("n") or DEFAULT_N, 10 * DEFAULT_N))
    tag = uuid.uuid4().hex[:8]
    provider = CapturingProvider()
    t0 = time.monotonic()
    with quiet_wakeups(), installed(provider):
        world = _build(tag)
        try:
            _attach_git_server(world)
            if world.server_note:
                bar = "!" * 78
                stdout.write(
                    f"{bar}\n!!! THE GIT TOOL SERVER (mcp-server-git) WAS NOT STARTED: {world.server_note}\n"
                    "!!! The figures below lack its tools: they are NOT the demo's.\n"
                    f"{bar}\n"
                )
            measured = _scenarios(world, provider, stdout)
            chat = [r for r in provider.requests if r.scenario == PROBE_SCENARIO]
            chat_item = chat[0].item_id if chat else ""
            chat_requests = provider.of_item(chat_item) if chat_item else []
            shared = (
                _shared_chars(chat_requests[0].serialized(), chat_requests[1].serialized())
                if len(chat_requests) >= 2
                else None
            )
            calls, day_tokens, woke = _idle_day(world, provider, heartbeats)
        finally:
            _teardown(world)
    elapsed = time.monotonic() - t0

    server = (
        f"{SERVER_NAME} (mcp-server-git, stdio): {world.server_tools} tools"
        if not world.server_note
        else f"{SERVER_NAME}: NOT STARTED ({world.server_note})"
    )
    stdout.write(
        f"prompts bench on {connection.vendor}: agent Ada (software engineer) with {len(WORKING_MEMORY)} "
        f"working-memory entries, {len(LONGTERM)} MEMORY.md sections, {len(OBSERVATIONS)} observations, "
        f"{len(world.background)} background items queued; tool server {server}; {elapsed:.1f} s\n"
        f"first request of each scenario; characters: the system prompt, the tool schemas and the messages "
        f"as compact JSON; est. tokens = characters / {CHARS_PER_TOKEN} (an estimate: "
        f"{CHARS_PER_TOKEN} characters a token)\n"
    )
    for line in _table(measured):
        stdout.write(line + "\n")
    for m in measured:
        if m.request is None:
            stdout.write(f"  {m.scenario} ({m.item_type}): no request captured; {m.note or 'no model call'}\n")
    stdout.write(
        "items (what each scenario's item became; one left to try again is dropped): "
        + "; ".join(f"{m.scenario} {m.item_type}: {m.note}" for m in measured if m.request is not None)
        + "\n"
    )
    prefix = None
    if shared is None:
        stdout.write("chat: no second request of the chat's item: shared prefix not measured\n")
    else:
        first, second = chat_requests[0].serialized(), chat_requests[1].serialized()
        prefix = 100.0 * shared / len(second) if second else 0.0
        stdout.write(
            f"chat, second request of the same item (after a {provider.probed} call), serialized as system + "
            f"tools + messages: shared prefix {prefix:.1f}% of its {len(second)} characters"
            f" ({shared} characters; the first request has {len(first)})\n"
        )
    stdout.write(
        f"an idle agent's day: {heartbeats} heartbeats (every {HEARTBEAT_MINUTES} min, nothing new in between): "
        f"{calls} model calls ({woke} heartbeats called the model), {day_tokens:.0f} est. prompt tokens\n"
    )

    figures = []
    for m in measured:
        r = m.request
        if r is None:
            continue
        figures.append(
            Figure(
                SUITE,
                f"{m.scenario}: est. prompt tokens",
                r.tokens,
                "tokens",
                f"{len(r.tools)} tools {r.tool_chars} + system {r.system_chars} + messages {r.message_chars} chars",
                None,
                "lower",
            )
        )
    got = [m.request for m in measured if m.request is not None]
    for what, chars in (
        ("tool schema", sum(r.tool_chars for r in got)),
        ("system prompt", sum(r.system_chars for r in got)),
        ("message", sum(r.message_chars for r in got)),
    ):
        figures.append(Figure(SUITE, f"{what} chars, all scenarios", chars, "chars", "", None, "lower"))
    if prefix is not None:
        figures.append(
            Figure(
                SUITE,
                "chat 2nd request: shared prefix",
                prefix,
                "%",
                "system + tools + messages of the first request",
                None,
                "higher",
            )
        )
    figures += [
        Figure(SUITE, "idle day: model calls", calls, "calls", f"{heartbeats} heartbeats", None, "lower"),
        Figure(SUITE, "idle day: est. prompt tokens", day_tokens, "tokens", f"{heartbeats} heartbeats", None, "lower"),
    ]
    return figures
