"""Which scenario an item runs, and the prompts it runs with."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.utils import timezone

from agentbus.selectors import reply_expected
from mailbox.models import MailboxItem
from mailbox.registry import ActivityType, MailboxType
from mailbox.selectors import Listed, depth_capped, depth_label, queue_depth, waiting_listing
from markus.agents import memory as working_memory
from markus.agents.models import Agent
from markus.memory.document import Section
from markus.memory.selectors import prompt_block as longterm_memory

T = MailboxType


class Ending(StrEnum):
    """How a run that completed answers whoever waits for its item, and what a task
    waiting for the run's verdict does without one (``attention.endings``)."""

    NONE = "none"  # nobody waits beyond the item's completion
    CHAT_REPLY = "chat_reply"  # the final answer is the person's chat reply
    BUS_ANSWER = "bus_answer"  # an agent's message waiting for an answer gets the final answer
    EXECUTION_VERDICT = "execution_verdict"  # the task waits for a submit or a failure
    REVIEW_VERDICT = "review_verdict"  # the task waits for a completion or a send-back


class Asking(StrEnum):
    """How the scenario's prompt tells it to ask a person something."""

    NONE = "none"
    APPROVAL = "approval"  # request_user_approval: the item waits for the answer
    IN_ANSWER = "in_answer"  # the person is in the chat: ask in the answer


@dataclass(frozen=True)
class Scenario:
    """The loop's table: one row per scenario, read wherever the loop does something
    differently for it. A new scenario is a row here (and its types in ``_BY_TYPE``),
    and at most one ending (``Ending``, settled in ``attention.endings``).

    - ``instructions``: what the LLM is told; ``max_tokens``: how long one answer may be
      (``MARKUS_LLM_MAX_TOKENS`` overrides it); ``done``: how its completion is logged.
    - ``preemptable``: False when a human waits on it (then only a merge is honoured at
      yield points).
    - ``ending``: how a completed run answers (a chat reply, a bus answer, a verdict).
    - ``in_chat``: a person's chat: the session opens with the chat's history, the
      follow-ups merged into it are their own words, it never waits behind a defer a
      judge proposes nor is re-prioritised by a deliberation, its outside agent hears it
      on the chat's stream, and it leaves no line in the main session (it is there).
    - ``batches``: may lead or join a batch; ``suggests_batch``: triage is told the
      items of this scenario may be acknowledged together.
    - ``protected``: triage never defers, drops or completes it inline.
    - ``skipped_near_budget``: completed as skipped when a budget is near or at its
      limit, and refused first by the budgets (``metering``).
    - ``watches_task``: stops when its task leaves in_progress (``interrupts``), and
      is not begun at all when it already has.
    - ``joins_open_work``: an item about a task or a requirement may go into its open
      work instead of running by itself (``markus.work.comment_routing``).
    - ``resumes_task_session``: continues the task's own session (``session``).
    - ``skips_without_news``: completed as skipped when nothing changed (``heartbeat``).
    - ``reaches_people``/``asks``: the prompt's "Talking to people" guidance.
    - ``recalls_by_item``: the long-term memory matching the item's text is recalled.
    - ``ends_turn_in_text``: the prompt says a turn ends with a plain answer.
    - ``activity_type``: its activity's type when the item type does not say one."""

    name: str
    instructions: str
    preemptable: bool = True
    max_tokens: int = 1024
    done: str = "handled"
    ending: Ending = Ending.NONE
    in_chat: bool = False
    batches: bool = True
    suggests_batch: bool = False
    protected: bool = False
    skipped_near_budget: bool = False
    watches_task: bool = False
    joins_open_work: bool = False
    resumes_task_session: bool = False
    skips_without_news: bool = False
    reaches_people: bool = True
    asks: Asking = Asking.NONE
    recalls_by_item: bool = True
    ends_turn_in_text: bool = True
    activity_type: ActivityType = ActivityType.CHAT


# Scenario names are the names LLM sessions are saved under and tools are offered in;
# they are written here, never built from mailbox type values, so renaming a type
# renames no scenario and no tool.
CHAT = "chat"
TASK_EXECUTION = "task_execution"
REVIEW = "review"
COMMENT_RESPONSE = "comment_response"
REQUIREMENT_ACTION = "requirement_action"
A2A = "a2a"
SESSION_RESPONSE = "session_response"
MENTION_RESPONSE = "mention_response"
SYSTEM_NOTICE = "system_notice"
CHECK_IN = "check_in"
DAILY_REPORT = "daily_report_writing"
DREAM_CYCLE = "dream_cycle"
REMINDER_DUE = "reminder_due"
HEARTBEAT = CHECK_IN
MEMORY_CONSOLIDATION = DREAM_CYCLE
# Triage (seed section 21): no item runs these; the loop runs them before it begins one.
DELIBERATION = "deliberation"
TRIAGE = "triage"

_COMMENT_PROTOCOL = (
    "Someone commented. MANDATORY before you reply: 1. fetch the full item (task_get / requirement_get); "
    "2. read ALL previous comments; 3. identify the commenter's intent; 4. check related context. "
    "Several comments may be bundled, separated by ---: answer them in one consolidated reply, using "
    "reply_to_comment_id for the most important one."
)
# Seed section 13.3: which human-facing tool fits which need, in the prompt of every
# scenario that may reach a person (``human_guidance``). Each line names only tools the
# scenario is offered (tests/attention/test_prompt_guidance.py holds the two together).
_TELL = (
    "- A status report, a progress update, an FYI alert or a finding for a person: notify_user (it appears "
    "in their chat with you and rings their bell; they may reply there). A task you finished: notify_user "
    "with related_task_id."
)
_ASK = (
    "- A person must approve or reject something: request_user_approval (its default options are Approve and "
    "Reject). They must choose between approaches: request_user_approval with your own options (id, label, "
    "description). You need their own words: request_user_approval with allow_freeform true. The item waits "
    "for the answer and you go on with other work; the answer comes back to this work."
)
_ASK_IN_CHAT = (
    "- The person is in the chat with you: ask them what you need to know in your answer (a decision, a "
    "choice, their own words) instead of a separate request."
)
_DISCUSS = (
    "- To discuss something with a person interactively: mention them (@name) in a task_comment or "
    "requirement_comment on the task or requirement it is about."
)
_RECALL = (
    "- To review what you did before (an execution's details, what a notification you sent was about): "
    "recall_activity (lists your activities; with an activity id, its logs)."
)
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            CHAT,
            "A person is talking to you. Answer them directly and helpfully. When they reply to a "
            "notification you sent (their message says which task or requirement it was about), look that up "
            "first (task_get, requirement_get, recall_activity) and answer with what it says.",
            preemptable=False,
            done="answered",
            ending=Ending.CHAT_REPLY,
            in_chat=True,
            batches=False,
            protected=True,
            asks=Asking.IN_ANSWER,
        ),
        Scenario(
            TASK_EXECUTION,
            "Do the task you are assigned. Use your tools; comment on the task as you go and submit it for "
            "review (task_submit_review, with a note of your deliverables) when it is done, or fail it "
            '(task_update status "failed" with the reason) if it cannot be done. You cannot complete your '
            "own task.",
            max_tokens=2048,
            done="executed",
            ending=Ending.EXECUTION_VERDICT,
            watches_task=True,
            asks=Asking.APPROVAL,
            activity_type=ActivityType.TASK,
        ),
        Scenario(
            REVIEW,
            "You were asked to review a task. Read it, comment, and complete it or send it back.",
            done="reviewed",
            ending=Ending.REVIEW_VERDICT,
            asks=Asking.APPROVAL,
        ),
        Scenario(COMMENT_RESPONSE, _COMMENT_PROTOCOL, joins_open_work=True, asks=Asking.APPROVAL),
        Scenario(
            REQUIREMENT_ACTION,
            "A requirement you proposed changed. Decide what to do next.",
            asks=Asking.APPROVAL,
        ),
        Scenario(
            A2A,
            "Another agent wrote to you. Read what each sender said and act on it. If they asked you "
            "something, answer with agent_reply (the sender, or a request waiting on it, gets it); your final "
            "answer is sent as the reply when you have not replied. Never wait for an answer from anyone: it "
            "arrives later as a new item.",
            ending=Ending.BUS_ANSWER,
            asks=Asking.APPROVAL,
        ),
        Scenario(
            SESSION_RESPONSE,
            "A person commented on a task you already finished; above is your session on that task. "
            "Answer them on the task with task_comment (reply_to_comment_id); do not redo the work unless they ask.",
            resumes_task_session=True,
        ),
        Scenario(
            MENTION_RESPONSE,
            "You were mentioned in a comment. Read the task or requirement and its thread (task_get / "
            "requirement_get), then answer where you were asked: in that thread, with task_comment or "
            "requirement_comment (reply_to_comment_id: the comment that mentioned you). Do what it asks of you "
            "that your tools allow, and say so there; never answer a mention with silence.",
            protected=True,
        ),
        Scenario(SYSTEM_NOTICE, "A system event happened. Act on it if it concerns your work.", suggests_batch=True),
        Scenario(
            CHECK_IN,
            "Periodic check-in: look at your mailbox and recent work; act only if something needs it.",
            done="heartbeat processed",
            skipped_near_budget=True,
            skips_without_news=True,
        ),
        Scenario(
            DAILY_REPORT,
            "It is the end of your day. Write your daily report from today's activities (listed in the message; "
            "recall_activity tells more): what you did, what came of it, what is still open and what comes "
            "next, in a few short paragraphs or bullets. Submit it once with submit_daily_report: it is stored "
            "and sent to your owner.",
            max_tokens=2048,
            done="report written",
            reaches_people=False,
        ),
        Scenario(
            REMINDER_DUE,
            "A reminder you set for yourself earlier came due; its text is below. Act on it now: if it is "
            "about telling a person something, tell them with notify_user (without target_user_id it reaches "
            "the person you set it for); if it is about work, do that work. If it is no longer relevant, say "
            "so. To be reminded again later, use schedule_reminder.",
            done="reminder handled",
        ),
        Scenario(
            DREAM_CYCLE,
            "Dream cycle: consolidate your long-term memory. The message lists the observations you saved "
            "since your last dream, as [obs ID] text. Call memory_consolidate once: remove the ids that no "
            "longer matter, merge ids that say the same thing (with the merged text), and promote lasting "
            "lessons, preferences and facts into MEMORY.md sections (short lines; a section keeps at most "
            "3000 characters, the document 15000, and the oldest lines go first when it is full). "
            "memory_search_longterm shows what MEMORY.md already says; recall_activity what you did.",
            done="memory consolidated",
            skipped_near_budget=True,
            reaches_people=False,
            recalls_by_item=False,
        ),
        Scenario(
            DELIBERATION,
            "[DELIBERATION MODE] Several items wait in your mailbox; they are listed in the message with "
            "their ids and how long each has waited. Decide, as yourself, what to do next. Look things up "
            "with your read-only tools if you need to; handle a simple item inline (a quick comment, "
            "message or notification) if that settles it. Then call complete_deliberation once: the item "
            "to process now (or a batch of related items processed together), the items to defer (with "
            "minutes) or drop (with a reason), the ids you completed inline, your reasoning, and a short "
            "situational awareness for your working memory. A human's chat, an execution trigger, a review "
            "request and a direct mention are never deferred, dropped or completed inline.",
            max_tokens=768,
            done="deliberated",
            ends_turn_in_text=False,
        ),
        Scenario(
            TRIAGE,
            "Several items wait in your mailbox (listed in the message). You may look things up with your "
            "read-only tools; then answer with JSON only: "
            '{"processItemId": "...", "deferItemIds": [], "dropItemIds": [], "reasoning": "..."}. '
            "Never defer or drop a human's item, an execution trigger or a review request.",
            max_tokens=512,
            done="triaged",
            reaches_people=False,
            ends_turn_in_text=False,
        ),
    ]
}
#: What an informational item (it runs no scenario) is, for the loop's questions.
NOTED = Scenario("", "", done="noted (informational, no LLM)", reaches_people=False)
#: The scenarios whose prompt gets the guidance; those that also offer request_user_approval.
HUMAN_GUIDANCE_SCENARIOS = frozenset(name for name, s in SCENARIOS.items() if s.reaches_people)
ASKING_SCENARIOS = frozenset(name for name, s in SCENARIOS.items() if s.asks == Asking.APPROVAL)
_ASKING_LINES = {Asking.NONE: [], Asking.APPROVAL: [_ASK], Asking.IN_ANSWER: [_ASK_IN_CHAT]}


def human_guidance(scenario: str) -> list[str]:
    """The prompt's ``## Talking to people`` lines for ``scenario`` (none for the
    scenarios that do not reach a person: triage, the dream cycle, the daily report)."""
    row = SCENARIOS.get(scenario, NOTED)
    if not row.reaches_people:
        return []
    return ["## Talking to people", _TELL, *_ASKING_LINES[row.asks], _DISCUSS, _RECALL]


# Which scenario each item type runs. Task status and requirement updates run one only
# when they ask for it (an execution trigger, an action-required update).
_BY_TYPE: dict[MailboxType, str] = {
    T.HUMAN_CHAT: CHAT,
    T.A2A_MESSAGE: A2A,
    # (Recorded merged into the item that asked; one found queued is an agent's answer.)
    T.CALLBACK_RESULT: A2A,
    T.REVIEW_REQUEST: REVIEW,
    T.TASK_COMMENT: COMMENT_RESPONSE,
    T.REQUIREMENT_COMMENT: COMMENT_RESPONSE,
    T.SESSION_REPLY: SESSION_RESPONSE,
    T.MENTION: MENTION_RESPONSE,
    T.SYSTEM_EVENT: SYSTEM_NOTICE,
    T.HEARTBEAT: CHECK_IN,
    T.DAILY_REPORT: DAILY_REPORT,
    T.MEMORY_CONSOLIDATION: DREAM_CYCLE,
    T.REMINDER: REMINDER_DUE,
}


def scenario_for(item: MailboxItem) -> str | None:
    """The scenario to run, or None for an informational item (completed without an LLM)."""
    t = MailboxType(item.source_type)
    if t == T.TASK_STATUS_UPDATE:
        return TASK_EXECUTION if item.triggers_execution else None
    if t == T.REQUIREMENT_UPDATE:
        return REQUIREMENT_ACTION if item.extra.get("actionRequired") else None
    return _BY_TYPE.get(t)


def scenario(name: str) -> Scenario:
    return SCENARIOS[name]


def row(name: str | None) -> Scenario:
    """The scenario's row; ``NOTED`` for none (an informational item) or a name no row has."""
    return SCENARIOS.get(name or "", NOTED)


def row_for(item: MailboxItem) -> Scenario:
    """The row of the scenario the item runs (``NOTED`` for an informational item)."""
    return row(scenario_for(item))


def bus_stream(item: MailboxItem) -> str | None:
    """The bus stream an agent's message came on, where its answer goes: only an agent's
    message carries one (``agentbus.services`` marks it ``streamId``)."""
    stream_id = item.marks.get("streamId")
    return stream_id if isinstance(stream_id, str) else None


def item_brief(item: MailboxItem) -> dict[str, Any]:
    return {
        "id": item.id,
        "type": item.source_type,
        "summary": item.summary,
        "content": item.content,
        "taskId": item.task_id,
        "requirementId": item.requirement_id,
        "priority": item.priority,
        "sender": (item.metadata or {}).get("senderName"),
        **_comment_brief(item),
        **_bus_brief(item),
    }


def _comment_brief(item: MailboxItem) -> dict[str, Any]:
    """The comment an item is about (a comment, a mention): what an answer replies to."""
    comment_id = (item.metadata or {}).get("commentId")
    return {"commentId": comment_id} if isinstance(comment_id, str) else {}


def _bus_brief(item: MailboxItem) -> dict[str, Any]:
    """An agent message's stream, and whether it waits for this agent's answer."""
    stream_id = bus_stream(item)
    if stream_id is None:
        return {}
    return {"streamId": stream_id, "expectsReply": reply_expected(stream_id, item.agent_id)}


# The mailbox block of an item's prompt (``mailbox_lines``) lists at most this many
# waiting items, then says how many more wait; a deliberation weighs at most this many.
# The seed's prompt carries the whole queue: a cap keeps a long queue's prompt bounded
# (check_mailbox pages the rest).
PROMPT_QUEUE_LIMIT = 50
# A waiting item's summary in a prompt's listing (the mailbox block, a deliberation's
# rivals, the mini triage's candidates): at most this many characters of it, so the
# listing stays bounded whatever a caller put in the summary.
SUMMARY_IN_PROMPT = 200


def prompt_summary(summary: str) -> str:
    """A waiting item's summary as a prompt lists it: one line, shortened."""
    text = " ".join(summary.split())
    return text if len(text) <= SUMMARY_IN_PROMPT else text[: SUMMARY_IN_PROMPT - 1] + "…"


def longterm_lines(
    agent: Agent, item: MailboxItem, scenario: str, *, state: tuple[list[Section], bool] | None = None
) -> list[str]:
    """The prompt's ``## Long-term Memory``: MEMORY.md and the observations matching
    the item (a dream lists its own), within the budget. ``state``: what the run read
    of it already (``markus.memory.selectors.prompt_state``)."""
    text = f"{item.summary} {item.content}" if row(scenario).recalls_by_item else ""
    return longterm_memory(agent.id, text, state=state)


#: How every item's turn ends (ARCHITECTURE decision 18): a typed signal, never a marker.
END_OF_TURN = "When done, answer in plain text with no tool call (or call end_turn). Never repeat a refused call."


def identity(agent: Agent) -> str:
    """The first line of every prompt of the agent, the mini triage's too (seed section
    21, "Triage Prompt Identity"): it speaks as itself, with its role."""
    return f"You are {agent.name}" + (f", {agent.role}." if agent.role else ".")


def system_prompt(agent: Agent, item: MailboxItem, scenario: str) -> str:
    """The scenario's system prompt: only what stays the same from call to call of the
    agent in this scenario (its role, the instructions, the guidance, how a turn ends),
    so a provider's prompt cache reads it, and the tools after it, from the cache. What
    changes goes last, in ``context_message``."""
    known = SCENARIOS.get(scenario)
    lines = [
        identity(agent),
        known.instructions if known is not None else f"Handle this {item.label.lower()}.",
    ]
    lines += human_guidance(scenario)
    if row(scenario).ends_turn_in_text:
        lines.append(END_OF_TURN)
    return "\n".join(lines)


def context_lines(
    agent: Agent,
    item: MailboxItem,
    scenario: str,
    *,
    memory: list[working_memory.Entry] | None = None,
    queue: list[MailboxItem] | None = None,
    depth: int | None = None,
    longterm: list[str] | None = None,
    waiting: bool = True,
) -> list[str]:
    """What changes between calls: the working memory (each entry with its age), the
    long-term memory that matches the item, and unless ``waiting`` is False (a
    deliberation lists them in its first message) the mailbox block (``mailbox_lines``).
    Each is read here unless the caller read it."""
    if memory is None:
        memory = working_memory.read(agent.id)
    lines = [now_line()]
    lines += working_memory.prompt_lines(memory)
    lines += longterm_lines(agent, item, scenario) if longterm is None else longterm
    if waiting:
        lines += mailbox_lines(agent, item, queue=queue, depth=depth)
    return lines


def mailbox_lines(
    agent: Agent, item: MailboxItem, *, queue: list[MailboxItem] | list[Listed] | None = None, depth: int | None = None
) -> list[str]:
    """The prompt's ``## Mailbox (N waiting)``: up to PROMPT_QUEUE_LIMIT waiting items in
    the order they will be taken (``queue``, in dequeue order; read here when None),
    ``- [priority] type: summary`` each, then ``- … and N more`` (``depth`` waiting in
    all: the loop's count when it began the item, so a first turn past the cap reads only
    the listed items). ``item``, the one being worked on, is not listed."""
    if queue is None:
        queue = waiting_listing(agent.id, PROMPT_QUEUE_LIMIT)  # what the lines show, no instances
        if len(queue) < PROMPT_QUEUE_LIMIT:
            depth = len(queue)
        elif depth is None or depth < len(queue):  # the loop's count, unless it is behind
            depth = queue_depth(agent.id)
    waiting = [q for q in queue if q.id != item.id][:PROMPT_QUEUE_LIMIT]
    depth = len(waiting) if depth is None else depth
    lines = [f"## Mailbox ({depth_label(depth)} waiting)"]
    lines += [f"- [{q.priority}] {q.source_type}: {prompt_summary(q.summary)}" for q in waiting]
    if depth > len(waiting):
        rest = f"over {depth_label(depth)[:-1]}" if depth_capped(depth) else str(depth - len(waiting))
        lines.append(f"- … and {rest} more")
    return lines


#: How the context note says the time (a model cannot know it otherwise: "in 2 hours").
NOW = "Now: "


def now_line() -> str:
    now = timezone.localtime()
    return f"{NOW}{now:%A %Y-%m-%d %H:%M %Z}"
