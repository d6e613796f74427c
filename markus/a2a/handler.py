"""The A2A methods over the mailbox: the SDK's ``RequestHandler`` interface, implemented
on an agent's mailbox items (``services``) and their update log (``progress``).

The call context names the caller and the agent (``state["caller"]``, ``state["agent"]``,
checked by the view) and where a stream resumes (``state["after"]``: the
``Last-Event-ID`` the client sent, the ``metadata.sequence`` of the last update it saw).

Waiting holds no thread: a follower sleeps on the channel layer, woken by the agent's
events about the task's item (``agent:mailbox``, sent after each commit), and reads the
database once a second when nothing arrives. A stream ends at a terminal state, at an
interrupted one (input-required) it sent, or at its deadline; a blocking send returns
at the same points with the task as it then is.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db.models import OuterRef, Subquery

from agentbus.pace import Paced
from markus.agents.auth import Caller
from markus.agents.models import Agent
from markus.core.channel_layer import event_text
from markus.core.errors import MarkusError
from markus.core.events import agent_group

from . import progress, services
from .access import access_task, caller_tasks
from .models import A2ATask, A2ATaskUpdate

POLL_SECONDS = 1.0  # the fallback re-read while no event arrives


def wait_seconds() -> float:
    """How long a blocking send or a stream waits at most (``MARKUS["CHAT_TIMEOUT_S"]``)."""
    return float(settings.MARKUS["CHAT_TIMEOUT_S"])


class Wakeups:
    """The agent's events that name one item, on the channel layer, as wake-ups."""

    def __init__(self, agent_id: str, item_id: str) -> None:
        self.group = agent_group(agent_id)
        self.item_id = item_id
        self.layer = get_channel_layer()
        self.channel = ""

    async def __aenter__(self) -> Wakeups:
        self.channel = await self.layer.new_channel()
        await self.layer.group_add(self.group, self.channel)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.layer.group_discard(self.group, self.channel)

    async def wait(self, timeout: float) -> None:
        """Until an event names the item, or ``timeout`` passes."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (remaining := deadline - loop.time()) > 0:
            try:
                message = await asyncio.wait_for(self.layer.receive(self.channel), timeout=remaining)
            except TimeoutError:
                return
            try:
                text = event_text(message)
            except (KeyError, TypeError, ValueError):
                return  # not an event of ours: read the database anyway
            if self.item_id in text:
                return


def _tail(task_id: str, after: int) -> tuple[list[A2ATaskUpdate], A2ATaskUpdate | None]:
    """The updates after ``after`` (recording what changed first), and the last one."""
    progress.record_progress(task_id)
    rows = progress.updates_after(task_id, after)
    last = rows[-1] if rows else A2ATaskUpdate.objects.filter(task_id=task_id).order_by("-sequence").first()
    return rows, last


async def follow(task: A2ATask, after: int, *, timeout: float) -> AsyncIterator[A2ATaskUpdate]:
    """The task's updates after ``after``, as they are written, until a terminal one, an
    interrupted one it yielded (the latest of the log), or ``timeout``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    start = after
    async with Wakeups(task.agent_id, task.id) as wakeups:
        while True:
            rows, last = await sync_to_async(_tail)(task.id, after)
            for row in rows:
                yield row
                after = row.sequence
            if last is not None:
                state = progress.state_of(last)
                if state in progress.TERMINAL or (state in progress.INTERRUPTED and last.sequence > start):
                    return
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            await wakeups.wait(min(POLL_SECONDS, remaining))


def _payload(response: StreamResponse) -> Event:
    kind = response.WhichOneof("payload")
    event: Event = getattr(response, kind)
    return event


def _send(caller: Caller, agent: Agent, message: Message) -> A2ATask:
    try:
        return services.task_send(caller=caller, agent=agent, message=message)
    except Paced:
        raise  # an agent's pace: the door answers 429 with Retry-After (markus.a2a.views)
    except MarkusError as exc:  # the mailbox's or the bus's refusal, said as is
        raise InvalidRequestError(message=str(exc)) from None


def _current(task_id: str) -> Task:
    progress.record_progress(task_id)
    return progress.snapshot(A2ATask.objects.get(id=task_id))


class MailboxRequestHandler(RequestHandler):
    @staticmethod
    def _parties(context: ServerCallContext) -> tuple[Caller, Agent]:
        return context.state["caller"], context.state["agent"]

    async def _task(self, context: ServerCallContext, task_id: str) -> A2ATask:
        caller, agent = self._parties(context)
        task = await sync_to_async(access_task)(caller, agent, task_id)
        if task is None:
            raise TaskNotFoundError
        return task

    @validate_request_params
    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task:
        caller, agent = self._parties(context)
        task = await sync_to_async(_send)(caller, agent, params.message)
        if not params.configuration.return_immediately:
            async for _ in follow(task, 0, timeout=wait_seconds()):
                pass
        current = await sync_to_async(_current)(task.id)
        return apply_history_length(current, params.configuration)

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        caller, agent = self._parties(context)
        task = await sync_to_async(_send)(caller, agent, params.message)
        async for row in follow(task, int(context.state.get("after") or 0), timeout=wait_seconds()):
            yield _payload(progress.stream_response(row))

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        """Without a resume point: the task as it is, then its later updates (a finished
        task has none: UnsupportedOperationError, as the SDK's handler answers). With
        one: every update after it, then the later ones."""
        task = await self._task(context, params.id)
        after = context.state.get("after")
        if after is None:
            current = await sync_to_async(_current)(task.id)
            if current.status.state in progress.TERMINAL:
                raise UnsupportedOperationError(
                    message=f"Task {task.id} is in terminal state: {TaskState.Name(current.status.state)}"
                )
            yield current
            after = progress.sequence_of(current)
        async for row in follow(task, int(after), timeout=wait_seconds()):
            yield _payload(progress.stream_response(row))

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        task = await self._task(context, params.id)
        current = await sync_to_async(_current)(task.id)
        return apply_history_length(current, params)

    @validate_request_params
    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        caller, _ = self._parties(context)
        task = await self._task(context, params.id)
        await sync_to_async(services.task_cancel)(caller=caller, task=task)
        return await sync_to_async(_current)(task.id)

    @validate_request_params
    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        caller, agent = self._parties(context)
        return await sync_to_async(_list_tasks)(caller, agent, params)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise UnsupportedOperationError(message="The agent does not support authenticated extended cards")


def _list_tasks(caller: Caller, agent: Agent, params: ListTasksRequest) -> ListTasksResponse:
    """The caller's tasks on the agent, newest first; ``pageToken`` is the offset."""
    size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
    if not 1 <= size <= MAX_LIST_TASKS_PAGE_SIZE:
        raise InvalidParamsError(message=f"pageSize must be between 1 and {MAX_LIST_TASKS_PAGE_SIZE}")
    token = params.page_token or "0"
    if not (token.isascii() and token.isdigit()) or len(token) > 9:
        raise InvalidParamsError(message="pageToken must be a nextPageToken of an earlier page")
    offset = int(token)
    rows = caller_tasks(caller, agent).order_by("-created_at", "-id")
    if params.context_id:
        rows = rows.filter(context_id=params.context_id)
    if params.status:
        last = A2ATaskUpdate.objects.filter(task=OuterRef("pk")).order_by("-sequence").values("state")[:1]
        rows = rows.annotate(state=Subquery(last)).filter(state=TaskState.Name(params.status))
    total = rows.count()
    page = list(rows[offset : offset + size])
    tasks = []
    for task in page:
        progress.record_progress(task.id)
        current = progress.snapshot(task)
        if not params.include_artifacts:
            current.ClearField("artifacts")
        tasks.append(apply_history_length(current, params))
    more = offset + len(page) < total
    return ListTasksResponse(
        tasks=tasks, next_page_token=str(offset + len(page)) if more else "", page_size=size, total_size=total
    )
