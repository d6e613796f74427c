"""The endings: how whoever waits for an item is answered, chosen by its scenario row's
``ending`` (``attention.scenarios.Ending``). A completed run's final answer is a
person's chat reply or an agent's bus answer (``answer``); a task waiting for the run's
verdict (an execution's submit or failure, a review's completion or send-back) is
checked for it and told when the run gives up (``verdict``); an outside agent waiting
for an item parked on a person is told so (``waiting_on_person``); an item the loop
gives up on is answered with why (``given_up``). ``attention.settle`` calls them; each ``match``
here is held exhaustive by the type checker, so a new ``Ending`` is settled everywhere
or fails the check."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import assert_never

from agentbus.services import reply_if_expected, tell_waiting
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.models import Agent
from markus.core.actors import Actor
from markus.work import liveness
from markus.work.comment_services import requirement_comment_create, task_comment_create
from notifications.models import Approval
from notifications.selectors import awaited

from .focus import Focus
from .lease import Fence
from .replies import deliver_chat_reply, store_chat_reply
from .scenarios import Ending, bus_stream, row_for
from .session import chat_session_id, effects_made


def answer(tx: Fence, focus: Focus, text: str, item: MailboxItem) -> None:
    """A completed run's final answer ``text`` answers whoever waits for ``item`` (the
    focus's item or an item of its batch), inside the fenced settle transaction: the
    reply and the completion commit together, and a stale worker sends nothing."""
    ending = focus.row.ending if item is focus.item else row_for(item).ending
    match ending:
        case Ending.CHAT_REPLY:
            deliver_chat_reply(tx, focus, text)
        case Ending.BUS_ANSWER:
            answer_on_bus(focus.agent, item, text)
        case Ending.NONE | Ending.EXECUTION_VERDICT | Ending.REVIEW_VERDICT:
            pass  # nobody waits for its words (a verdict is given with the task tools)
        case _:
            assert_never(ending)


def answer_on_bus(responder: Agent, item: MailboxItem, text: str) -> bool:
    """An agent's message waiting for this agent's answer (a bus ``request`` returns when
    its reply stream closes) gets ``text`` when the agent did not call agent_reply."""
    stream_id = bus_stream(item)
    if stream_id is None:
        return False
    return bool(reply_if_expected(responder=responder, stream_id=stream_id, text=text, actor=f"agent:{responder.id}"))


def waiting_on_person(item: MailboxItem, approval: Approval) -> None:
    """The run parked ``item`` for a person's ``approval``: an outside agent waiting for
    its answer on the bus hears so (``agentbus.services.tell_waiting``), as an A2A task
    says input-required. A person's chat or comment has the agent's page, which shows
    the wait, and the approval's notification goes to a person already."""
    ending = row_for(item).ending
    match ending:
        case Ending.BUS_ANSWER:
            stream_id = bus_stream(item)
            if stream_id is not None:
                responder = Agent.objects.get(id=item.agent_id)
                tell_waiting(
                    responder=responder,
                    stream_id=stream_id,
                    text=awaited(approval),
                    approval_id=approval.id,
                    actor=f"agent:{responder.id}",
                )
        case Ending.CHAT_REPLY | Ending.NONE | Ending.EXECUTION_VERDICT | Ending.REVIEW_VERDICT:
            pass
        case _:
            assert_never(ending)


# ---------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class TaskVerdict:
    """A task that waits for the run's verdict: the mark (``MailboxItem.marks``) that
    counts the runs that gave none, whether the task still waits for it, what is said
    when it does, and what the task does when the runs give up."""

    mark: str
    awaits: Callable[[MailboxItem], bool]
    missing: str
    gave_up: Callable[[str, str], object]  # (task id, reason)


EXECUTION = TaskVerdict(
    mark="executionRetries",
    awaits=lambda item: bool(
        item.task_id and liveness.execution_awaits_verdict(item.task_id, item.extra.get("executionRound"))
    ),
    missing="the execution ended without task_submit_review or a failure; the task is still in_progress",
    gave_up=lambda task_id, reason: liveness.execution_gave_up(task_id, reason=reason),
)
REVIEW = TaskVerdict(
    mark="reviewRetries",
    awaits=lambda item: bool(
        item.task_id and liveness.review_awaits_verdict(item.task_id, item.extra.get("reviewRound"))
    ),
    missing="the review ended without completing the task or sending it back; the task is still in review",
    gave_up=lambda task_id, reason: liveness.review_gave_up(task_id, reason=reason),
)


def verdict(ending: Ending) -> TaskVerdict | None:
    """The verdict a task waits for from a run of this ending (None: no task waits)."""
    match ending:
        case Ending.EXECUTION_VERDICT:
            return EXECUTION
        case Ending.REVIEW_VERDICT:
            return REVIEW
        case Ending.NONE | Ending.CHAT_REPLY | Ending.BUS_ANSWER:
            return None
        case _:
            assert_never(ending)


# ---------------------------------------------------------------------------- giving up


def given_up(tx: Fence, item: MailboxItem, reason: str) -> str | None:
    """Whoever waits for an item the loop gives up on (a person's chat or comment, an
    agent's request) is answered, with why and what was already done (the journal's
    calls that took effect), so nobody waits in silence. Inside the caller's fenced
    transaction. Returns how they were answered (None: nobody was waiting)."""
    ending = row_for(item).ending
    match ending:
        case Ending.CHAT_REPLY:
            merged = list(
                MailboxItem.objects.filter(
                    merged_into_id=item.id, status=Status.MERGED, source_type=MailboxType.HUMAN_CHAT
                ).order_by("queued_at", "id")
            )
            text = _given_up(item, reason)
            store_chat_reply(tx, item, merged, text, session_id=chat_session_id(item), failed=True)
            return "chat"
        case Ending.BUS_ANSWER:
            if bus_stream(item) is None:
                return None
            answered = answer_on_bus(Agent.objects.get(id=item.agent_id), item, _given_up(item, reason))
            return "bus" if answered else None
        case Ending.NONE | Ending.EXECUTION_VERDICT | Ending.REVIEW_VERDICT:
            return _answer_comment(item, reason)
        case _:
            assert_never(ending)


def _answer_comment(item: MailboxItem, reason: str) -> str | None:
    """A person's comment on a task or a requirement is answered in its thread."""
    if not item.is_user_interaction:
        return None
    if item.task_id:
        actor = Actor.for_agent(Agent.objects.get(id=item.agent_id))
        task_comment_create(task_id=item.task_id, actor=actor, content=_given_up(item, reason))
        return "task comment"
    if item.requirement_id:
        actor = Actor.for_agent(Agent.objects.get(id=item.agent_id))
        requirement_comment_create(requirement_id=item.requirement_id, actor=actor, content=_given_up(item, reason))
        return "requirement comment"
    return None


def _given_up(item: MailboxItem, reason: str) -> str:
    made = effects_made(item)
    did = f" Before that I had already done: {', '.join(r.name for r in made)}." if made else ""
    return f"I could not finish this: {reason}.{did}"
