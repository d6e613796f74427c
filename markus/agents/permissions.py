"""Who may do what to an agent: the one table every door reads (the API views, the
pages, the WebSocket consumers, the bus, the chat and the tools).

A caller stands in one *relation* to an agent: ``staff``, its ``owner``, the owner of
its team (``team_owner``), a member of its team (``teammate``), the agent itself
(``self``: its own bearer token), or ``none``. A *right* is the set of relations it
admits:

- ``see``: watch the agent (its mind, mailbox, decisions, activities, memory, reports);
- ``talk``: chat with it, open a session, post the item types people write;
- ``control``: change it and its work (pause, resume, stop, start, wake, retry, drop,
  edit, cancel reminders, memory, heartbeats and operator events, act as it on the bus);
- ``act``: what the agent itself may also do (its memory, its own inbox).

A teammate may watch and talk, never control. Whoever may not *see* the agent gets a
404 exactly like a missing agent; whoever sees it but lacks the right gets a 403 that
says who has it. Every operation is a row of ``OPERATIONS`` (the README's permission
table is ``markdown_table()``; tests/api/test_permission_matrix.py walks it against the
schema, the pages and the sockets, and fails on an operation without a row).

Which item types a caller may post is ``POSTABLE``: people (and the agent itself) the
types people write; ``system_event`` those who control the agent; the loop's own types
(dreams, reports, heartbeats, reminders, review requests, status updates, session
replies, agent messages) nobody through a door: only the system makes them.

Private chat sessions: a session of one person (``ChatSession.user``, not the main
session) is readable by that person, staff and the agent itself (``Reader``); everybody
else gets ``PLACEHOLDER`` wherever its content appears: mailbox items, the timeline,
decisions, activities and their logs, the mind page and the live events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework.exceptions import NotAuthenticated

from mailbox.registry import MailboxType
from mailbox.representation import PLACEHOLDER, redacted

from .models import Agent

if TYPE_CHECKING:
    from .auth import AnyRequest


class Relation(StrEnum):
    STAFF = "staff"
    OWNER = "owner"
    TEAM_OWNER = "team_owner"
    TEAMMATE = "teammate"
    SELF = "self"  # the agent's own bearer token
    NONE = "none"


class Right(StrEnum):
    SEE = "see"
    TALK = "talk"
    CONTROL = "control"
    ACT = "act"  # control, or the agent itself
    SELF = "self"  # the agent itself only
    APPROVE = "approve"  # staff, its team's owner: approve what its tool servers' tools do
    SIGNED_IN = "signed_in"  # not about one agent: any signed-in user (or agent token)
    USER = "user"  # not about one agent: a signed-in user, not an agent token
    STAFF = "staff"  # staff only
    CREATE = "create"  # not about one agent: staff and team owners (MARKUS_AGENTS_CREATE: anyone)


R = Relation
RIGHTS: dict[Right, frozenset[Relation]] = {
    Right.SEE: frozenset({R.STAFF, R.OWNER, R.TEAM_OWNER, R.TEAMMATE, R.SELF}),
    Right.TALK: frozenset({R.STAFF, R.OWNER, R.TEAM_OWNER, R.TEAMMATE, R.SELF}),
    Right.CONTROL: frozenset({R.STAFF, R.OWNER, R.TEAM_OWNER}),
    Right.ACT: frozenset({R.STAFF, R.OWNER, R.TEAM_OWNER, R.SELF}),
    Right.SELF: frozenset({R.SELF}),
    Right.APPROVE: frozenset({R.STAFF, R.TEAM_OWNER}),
}

# Who holds a right, as the 403 says it.
HOLDERS: dict[Right, str] = {
    Right.SEE: "its owner, its team, staff and the agent itself",
    Right.TALK: "its owner, its team, staff and the agent itself",
    Right.CONTROL: "its owner, its team's owner and staff",
    Right.ACT: "its owner, its team's owner, staff and the agent itself",
    Right.SELF: "the agent itself (its own bearer token)",
    Right.APPROVE: "staff and its team's owner",
}


@dataclass(frozen=True)
class Operation:
    right: Right
    what: str  # the operation in a few words, for the table and the 403


def _op(right: Right, what: str) -> Operation:
    return Operation(right, what)


S, T, C, A = Right.SEE, Right.TALK, Right.CONTROL, Right.ACT
# Every operation of every door: the API's by operationId, the pages' as ``page:…``,
# the sockets' as ``ws:…``, the bus's own checks as ``bus:…``, the tools' as ``tool:…``, the A2A door's as ``a2a:…``.
OPERATIONS: dict[str, Operation] = {
    # ---- an agent
    "agents_list": _op(Right.SIGNED_IN, "list the agents the caller may see"),
    "agents_create": _op(
        Right.CREATE,
        "create an agent (the caller owns it): staff; a team owner in a team they own or with no team "
        "(MARKUS_AGENTS_CREATE=anyone: every person)",
    ),
    "agents_retrieve": _op(S, "read an agent"),
    "agents_partial_update": _op(C, "change an agent"),
    "agents_pause": _op(C, "pause an agent"),
    "agents_resume": _op(C, "resume an agent"),
    "agents_stop": _op(C, "stop an agent"),
    "agents_start": _op(C, "start an agent"),
    "agents_token_rotate": _op(C, "give it a new token (shown once; the old one is refused at once)"),
    "agents_token_revoke": _op(C, "revoke its token (nothing acts as it until one is rotated in)"),
    "agents_mind": _op(S, "read the mind (focus, queue, working memory)"),
    "agents_decisions": _op(S, "read the decisions"),
    "agents_activity_logs": _op(S, "read an activity's logs"),
    "agents_mailbox_list": _op(S, "read the mailbox timeline"),
    "agents_mailbox_enqueue": _op(T, "post an item (the types of POSTABLE)"),
    "agents_chat": _op(T, "chat"),
    "agents_chat_resume": _op(T, "resume the reply stream of one's own chat (Last-Event-ID)"),
    "agents_sessions_list": _op(S, "list chat sessions (private ones: their person's)"),
    "agents_sessions_create": _op(T, "open a chat session"),
    "agents_session_messages": _op(S, "read a session's messages (private ones: their person's)"),
    "agents_memory_retrieve": _op(S, "read memory"),
    "agents_memory_replace": _op(A, "replace the memory document"),
    "agents_memory_observations": _op(S, "read observations"),
    "agents_memory_observations_create": _op(A, "add an observation"),
    "agents_memory_search": _op(S, "search memory"),
    "agents_reminders": _op(S, "list reminders"),
    "agents_reminder_cancel": _op(C, "cancel a reminder"),
    "agents_tools": _op(S, "list the tools it is offered (built-in and its tool servers') with their policies"),
    "tool:list_now": _op(C, "list its tool servers' tools anew when reading its tools (others read the last listing)"),
    "tool:notify_user": _op(
        T,
        "be addressed by its notify_user: target_user_id; else the person it talks to, the last person who "
        "chatted with it, its owner, its team's owner, the first of them it may talk to",
    ),
    "tool:approve_call": _op(
        Right.APPROVE,
        "approve a call of one of its ask tools: the staff member who asked; else its team's owner when the "
        "server is offered to the team; else the server's owner; never its owner for owning it",
    ),
    "agents_reports": _op(S, "list daily reports"),
    "agents_report": _op(S, "read a daily report"),
    "agents_usage": _op(S, "read its LLM usage per day and model, and what its budgets say"),
    "agents_agentbus_inbox": _op(S, "wait on the bus inbox (the agent itself acknowledges)"),
    "agents_agentbus_pending_retrieve": _op(S, "count the bus inbox"),
    "agents_agentbus_drain_create": _op(S, "drain the bus inbox (peek for others; consume: the agent itself)"),
    # ---- the bus
    "agentbus_streams_create": _op(Right.SIGNED_IN, "open a stream (as an agent: bus:act_as)"),
    "agentbus_streams_append_create": _op(Right.SIGNED_IN, "append to a stream (as an agent: bus:act_as)"),
    "agentbus_streams_close_create": _op(Right.SIGNED_IN, "close a stream (as an agent: bus:act_as)"),
    "agentbus_streams_events_retrieve": _op(Right.SIGNED_IN, "read a stream one takes part in or may see"),
    "agentbus_request": _op(Right.SIGNED_IN, "ask an agent and wait (as an agent: bus:act_as)"),
    "bus:act_as": _op(A, "speak on the bus as the agent (sender, stream owner)"),
    "bus:address": _op(S, "address the agent on the bus (agents: their team's and owner's)"),
    # ---- the A2A door (markus/a2a; outside /api/, by URL name like the pages): an agent's
    # token reaches itself by its row, other agents as bus:address says
    "a2a:directory": _op(Right.SIGNED_IN, "the A2A directory card: the running agents the caller reaches"),
    "a2a:card": _op(S, "the agent's A2A card"),
    "a2a:rpc": _op(T, "A2A JSON-RPC: send a message (a person's: a chat; an agent's: on the bus); one's own tasks"),
    # ---- work, notifications (their own visibility rules: tasks and requirements of
    # the agents the caller may see; a user's own notifications and approvals)
    "tasks_list": _op(Right.SIGNED_IN, "list the tasks the caller may see"),
    "tasks_create": _op(Right.SIGNED_IN, "file a task (its assignee: an agent the caller may see)"),
    "tasks_retrieve": _op(Right.SIGNED_IN, "read a task the caller may see"),
    "tasks_comments_retrieve": _op(Right.SIGNED_IN, "read a task's comments"),
    "tasks_comments_create": _op(Right.SIGNED_IN, "comment on a task the caller may see"),
    "tasks_retry_create": _op(Right.SIGNED_IN, "retry a task the caller may see"),
    "tasks_transition_create": _op(Right.SIGNED_IN, "move a task the caller may see (cascade: its waiting dependents)"),
    "tasks_history": _op(Right.SIGNED_IN, "read a task's status history"),
    "requirements_list": _op(Right.SIGNED_IN, "list the requirements the caller may see"),
    "requirements_create": _op(Right.SIGNED_IN, "file a requirement"),
    "requirements_retrieve": _op(Right.SIGNED_IN, "read a requirement the caller may see"),
    "requirements_step": _op(Right.SIGNED_IN, "approve, reject, start, complete, cancel a requirement"),
    "requirements_comments_retrieve": _op(Right.SIGNED_IN, "read a requirement's comments"),
    "requirements_comments_create": _op(Right.SIGNED_IN, "comment on a requirement"),
    "requirements_resubmit_create": _op(Right.SIGNED_IN, "resubmit a requirement"),
    "requirements_history": _op(Right.SIGNED_IN, "read a requirement's status history"),
    "teams_list": _op(Right.SIGNED_IN, "list the teams the caller owns or belongs to (an agent: its own)"),
    "teams_retrieve": _op(Right.SIGNED_IN, "read a team the caller owns or belongs to"),
    "teams_partial_update": _op(Right.USER, "change a team's settings (agentTaskApproval): its owner and staff"),
    "notifications_list": _op(Right.USER, "the caller's notifications"),
    "notifications_read_create": _op(Right.USER, "mark one of the caller's notifications read"),
    "notifications_mark_all_read_create": _op(Right.USER, "mark all the caller's notifications read"),
    "approvals_list": _op(Right.USER, "the approvals the caller may answer"),
    "approvals_respond_create": _op(Right.USER, "answer an approval addressed to the caller"),
    # a team's usage (markus.usage): seen by its owner, its members and staff (others: 404)
    "teams_usage": _op(Right.USER, "read a team's LLM usage per day and model (its owner, members, staff)"),
    # a person's budget (it holds their agents outside any team) and the deployment's: staff's
    "users_budget_retrieve": _op(Right.USER, "read a person's budget: their own (staff: anyone's)"),
    "users_budget_partial_update": _op(Right.STAFF, "set a person's budget"),
    "budgets_deployment_retrieve": _op(Right.STAFF, "read the deployment's budget"),
    "budgets_deployment_partial_update": _op(Right.STAFF, "set the deployment's budget"),
    # ---- tool servers (MCP): registered by staff; attached to an agent by who controls it
    "tool_servers_list": _op(Right.STAFF, "list the tool servers"),
    "tool_servers_create": _op(Right.STAFF, "register a tool server (stdio ones run as the worker's user)"),
    "tool_servers_retrieve": _op(Right.STAFF, "read a tool server (its secrets: never)"),
    "tool_servers_partial_update": _op(Right.STAFF, "change a tool server, its policies, its teams"),
    "tool_servers_destroy": _op(Right.STAFF, "delete a tool server"),
    # ---- pages (by URL name)
    "page:mind": _op(S, "the mind view"),
    "page:mind-timeline": _op(S, "the mind view's timeline pages"),
    "page:mind-activity-logs": _op(S, "an activity's logs"),
    "page:agent-report": _op(S, "a daily report"),
    "page:mind-control": _op(C, "pause, resume, wake, run a heartbeat from the mind view"),
    "page:mind-item-control": _op(C, "retry or drop an item from the mind view"),
    "page:mind-reminder-cancel": _op(C, "cancel a reminder from the mind view"),
    "page:chat": _op(T, "the chat page: its sessions (private ones: their person's), the history, new messages"),
    "page:chat-messages": _op(S, "a session's messages on the chat page (earlier ones, new ones)"),
    "page:chat-session-new": _op(T, "open a chat session from the chat page"),
    # connecting an outside agent (markus/web/connect_pages.py)
    "page:agent-new": _op(
        Right.CREATE, "add an agent from /agents/ (as agents_create): internal, or outside with its token shown once"
    ),
    "page:agent-connect": _op(C, "an outside agent's connect page: ready-made configuration for its harness"),
    "page:agent-token-rotate": _op(C, "give it a new token from its connect page (as agents_token_rotate)"),
    "page:agent-token-revoke": _op(C, "revoke its token from its connect page (as agents_token_revoke)"),
    # usage, budgets and an agent's settings (markus/web/usage_pages.py, agent_settings.py):
    # a budget set there as the API sets it (agent: control; team: its owner, staff; person, deployment: staff)
    "page:agent-usage": _op(S, "an agent's usage page (as agents_usage): per day and model, charts, its budgets"),
    "page:team-usage": _op(Right.USER, "a team's usage page (as teams_usage; its owner, members, staff)"),
    "page:deployment-usage": _op(Right.STAFF, "the deployment's usage page and its budget"),
    "page:agent-settings": _op(C, "an agent's settings page: name, role, tool servers (as agents_partial_update)"),
    # the work pages: the work API's rules (tasks and requirements the caller may see)
    "page:work-task-new": _op(Right.USER, "file a task from /work (as tasks_create)"),
    "page:work-task-move": _op(Right.USER, "move a task the caller may see (as tasks_transition_create)"),
    "page:work-task-comment": _op(Right.USER, "comment on a task the caller may see, with mentions and replies"),
    "page:work-requirement-new": _op(Right.USER, "file a requirement from /work (as requirements_create)"),
    "page:work-requirement-step": _op(
        Right.USER, "approve, reject, complete, cancel a requirement (as requirements_step)"
    ),
    "page:work-requirement-comment": _op(Right.USER, "comment on a requirement the caller may see"),
    "page:approvals": _op(Right.USER, "the caller's approvals to answer, and the last ones answered"),
    "page:approval-answer": _op(Right.USER, "answer one of the caller's approvals (as approvals_respond_create)"),
    # the teams' group channels: a team its owner, its members and staff see (others: 404)
    "page:teams": _op(Right.USER, "the teams the caller may see, each with its channel"),
    "page:team-channel": _op(Right.USER, "read a team's group channel (group:<teamId>) and its running members"),
    "page:team-channel-messages": _op(Right.USER, "earlier messages of a team's channel (Load earlier)"),
    # ---- sockets (by route)
    "ws:ws/agents/<str:agent_id>/": _op(S, "the agent's live events (private content: its person's)"),
    "ws:ws/agents/<str:agent_id>/mind/": _op(S, "the mind view's live HTML"),
    "ws:ws/notifications/": _op(Right.USER, "the caller's notifications"),
    "ws:ws/board/": _op(Right.SIGNED_IN, "the work pages' live events (tasks, requirements, agents the caller sees)"),
    # ---- the console
    "console": _op(Right.STAFF, "the Django admin and its dashboard"),
    "console:retention": _op(
        Right.STAFF, "the prune runs (admin, read-only) and the dashboard's last prune; `manage.py prune` is local"
    ),
}

# Which item types a caller may post through a door, by the right it needs on the
# agent; a type not here is the loop's own (the system makes it, nobody posts it).
POSTABLE: dict[MailboxType, Right] = {
    MailboxType.HUMAN_CHAT: Right.TALK,
    MailboxType.TASK_COMMENT: Right.TALK,
    MailboxType.REQUIREMENT_COMMENT: Right.TALK,
    MailboxType.MENTION: Right.TALK,
    MailboxType.SYSTEM_EVENT: Right.CONTROL,
}


# -------------------------------------------------------------------------- relations


def user_relation(user: User | AnonymousUser | None, agent: Agent) -> Relation:
    """How a user stands to an agent (``agent.team`` is read: select it with the agent)."""
    if user is None or not user.is_authenticated:
        return R.NONE
    if user.is_staff:
        return R.STAFF
    if agent.owner_id == user.pk:
        return R.OWNER
    team = agent.team
    if team is None:
        return R.NONE
    if team.owner_id == user.pk:
        return R.TEAM_OWNER
    return R.TEAMMATE if team.members.filter(pk=user.pk).exists() else R.NONE


def relation(caller: AnyRequest, agent: Agent) -> Relation:
    acting = getattr(caller, "auth", None)
    if isinstance(acting, Agent):
        return R.SELF if acting.id == agent.id else R.NONE
    return user_relation(getattr(caller, "user", None), agent)


def has_right(rel: Relation, right: Right) -> bool:
    return rel in RIGHTS[right]


def may(caller: AnyRequest, operation: str, agent: Agent) -> bool:
    return has_right(relation(caller, agent), OPERATIONS[operation].right)


def user_may(user: User | AnonymousUser | None, right: Right, agent: Agent) -> bool:
    return has_right(user_relation(user, agent), right)


def user_may_do(user: User | AnonymousUser | None, operation: str, agent: Agent) -> bool:
    return has_right(user_relation(user, agent), OPERATIONS[operation].right)


def require_staff(caller: AnyRequest, operation: str) -> User:
    """The caller's user for an operation of staff (not about one agent): 401 for nobody,
    403 saying so for anybody else (an agent's token included)."""
    assert OPERATIONS[operation].right == Right.STAFF, operation
    user = getattr(caller, "user", None)
    acting = getattr(caller, "auth", None)
    if not isinstance(acting, Agent) and (user is None or not user.is_authenticated):
        raise NotAuthenticated()
    if isinstance(acting, Agent) or not isinstance(user, User) or not user.is_staff:
        raise PermissionDenied(f"Only staff may {OPERATIONS[operation].what}.")
    return user


# Who may create agents (``Right.CREATE``), as its 403 says it.
CREATORS = "staff and team owners (in a team they own, or with no team; MARKUS_AGENTS_CREATE=anyone: every person)"


def require_creator(caller: AnyRequest, team_owner_id: int | None) -> User:
    """The caller's user if they may create an agent in a team owned by ``team_owner_id``
    (None: with no team): staff; a team's owner in their team or with no team; with
    ``MARKUS["AGENTS_CREATE"]`` "anyone", every signed-in person. 401 for nobody, 403
    saying who may for anybody else (an agent's token included)."""
    user = getattr(caller, "user", None)
    acting = getattr(caller, "auth", None)
    if not isinstance(acting, Agent) and (user is None or not user.is_authenticated):
        raise NotAuthenticated()
    if isinstance(acting, Agent) or not isinstance(user, User):
        raise PermissionDenied(f"Only {CREATORS} may create an agent.")
    if user.is_staff or settings.MARKUS["AGENTS_CREATE"] == "anyone":
        return user
    owns = user.owned_teams.exists() if team_owner_id is None else team_owner_id == user.pk
    if not owns:
        raise PermissionDenied(f"Only {CREATORS} may create an agent.")
    return user


def refusal(operation: str) -> str:
    op = OPERATIONS[operation]
    return f"Only {HOLDERS[op.right]} may {op.what}."


def check(caller: AnyRequest, operation: str, agent: Agent) -> Agent:
    """``agent`` if the caller may do ``operation`` to it; 404 if the caller may not
    even see it (like a missing agent), 403 saying who may if it only sees it."""
    rel = relation(caller, agent)
    if not has_right(rel, Right.SEE):
        raise Http404("No such agent.")
    if not has_right(rel, OPERATIONS[operation].right):
        raise PermissionDenied(refusal(operation))
    return agent


def require(caller: AnyRequest, operation: str, agent_id: str) -> Agent:
    """The agent ``agent_id`` for ``operation`` (see ``check``)."""
    agent = Agent.objects.select_related("team").filter(id=agent_id).first()
    if agent is None:
        raise Http404("No such agent.")
    return check(caller, operation, agent)


# ------------------------------------------------------------------------ item types


def postable_types(rel: Relation) -> list[str]:
    return [t.value for t, right in POSTABLE.items() if has_right(rel, right)]


def check_post(caller: AnyRequest, agent: Agent, source_type: str) -> None:
    """403 unless the caller may post an item of ``source_type`` to ``agent``; the
    message names the types it may post."""
    rel = relation(caller, agent)
    right = POSTABLE.get(MailboxType(source_type))
    if right is not None and has_right(rel, right):
        return
    allowed = ", ".join(postable_types(rel)) or "none"
    if right is None:
        raise PermissionDenied(
            f"sourceType {source_type} is the loop's own: only the system makes it. You may post: {allowed}."
        )
    raise PermissionDenied(f"Only {HOLDERS[right]} may post {source_type}. You may post: {allowed}.")


# ------------------------------------------------------------------- private content


@dataclass(frozen=True)
class Reader:
    """Who reads, as far as private conversations go: the person whose session it is,
    staff and the agent itself read them; anybody else reads ``PLACEHOLDER``."""

    user_id: int | None
    sees_all: bool

    def sees(self, private_to: int | None) -> bool:
        return private_to is None or self.sees_all or self.user_id == private_to

    def item(self, entry: dict[str, Any]) -> dict[str, Any]:
        """An item's representation (with its ``privateTo``) as this reader may see it."""
        return entry if self.sees(entry.get("privateTo")) else redacted(entry)

    def items(self, entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        return [self.item(e) for e in entries]

    def focus(self, focus: dict[str, Any] | None) -> dict[str, Any] | None:
        """A ``currentFocus`` (``attention.records.focus_of``) as this reader may see it."""
        if focus is None or self.sees(focus.get("privateTo")):
            return focus
        return {**focus, "label": PLACEHOLDER}

    def text(self, private_to: int | None, text: str) -> str:
        """Text of a private conversation (a decision's reasoning, a log's content)."""
        return text if self.sees(private_to) else PLACEHOLDER


# A reader who sees no private conversation (the fail-safe default of a view that
# was not told who reads).
PUBLIC = Reader(None, False)


def reader_for(user: User | AnonymousUser | None, acting: Agent | None = None) -> Reader:
    if acting is not None:
        return Reader(None, True)
    if user is None or not user.is_authenticated:
        return Reader(None, False)
    return Reader(user.pk, bool(user.is_staff))


def reader(caller: AnyRequest) -> Reader:
    acting = getattr(caller, "auth", None)
    return reader_for(getattr(caller, "user", None), acting if isinstance(acting, Agent) else None)


# --------------------------------------------------------------------------- the table


def markdown_table() -> str:
    """``OPERATIONS`` as the README's permission table."""
    cols = [R.OWNER, R.TEAM_OWNER, R.TEAMMATE, R.STAFF, R.SELF]
    head = "| operation | what | owner | team owner | teammate | staff | agent itself | outsider, anonymous |"
    lines = [head, "|---|---|:-:|:-:|:-:|:-:|:-:|:-:|"]
    for name, op in OPERATIONS.items():
        if op.right in RIGHTS:
            marks = ["yes" if r in RIGHTS[op.right] else "403" for r in cols]
            outsider = "404"
        else:
            marks = [_global_mark(op.right, r) for r in cols]
            outsider = "401/403" if op.right != Right.SIGNED_IN else "401 (an outsider sees only their own)"
        lines.append(f"| `{name}` | {op.what} | " + " | ".join(marks) + f" | {outsider} |")
    return "\n".join(lines)


def _global_mark(right: Right, rel: Relation) -> str:
    if right == Right.CREATE:  # the owner column: a person who owns no team
        return "yes" if rel in (R.STAFF, R.TEAM_OWNER) else "403"
    if right == Right.STAFF:
        return "yes" if rel == R.STAFF else "403"
    if right == Right.USER:
        return "403" if rel == R.SELF else "yes"
    return "yes"
