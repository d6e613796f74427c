"""MAILBOX_TYPE_REGISTRY: the single source of truth for mailbox item types.

Every other module (model choices, admin and API filters, attention heuristics,
activity-type derivation, the mind view's labels, icons and colours) reads from here.
No mailbox type literal may appear anywhere else (tests/test_registry_literals.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import IntEnum, StrEnum


class MailboxType(StrEnum):
    SYSTEM_EVENT = "system_event"
    HUMAN_CHAT = "human_chat"
    TASK_COMMENT = "task_comment"
    MENTION = "mention"
    SESSION_REPLY = "session_reply"
    TASK_STATUS_UPDATE = "task_status_update"
    A2A_MESSAGE = "a2a_message"
    REVIEW_REQUEST = "review_request"
    REQUIREMENT_COMMENT = "requirement_comment"
    REQUIREMENT_UPDATE = "requirement_update"
    DAILY_REPORT = "daily_report"
    HEARTBEAT = "heartbeat"
    MEMORY_CONSOLIDATION = "memory_consolidation"
    # An item the agent put in its own future (``schedule_reminder``): stored deferred
    # until its time, then processed once like any other item.
    REMINDER = "reminder"
    # The answer to a question an agent asked and waits for (``agent_send_message`` with
    # ``await_reply``): recorded merged into the asking item, whose session it resumes.
    CALLBACK_RESULT = "callback_result"


class Category(StrEnum):
    INTERACTION = "interaction"
    TASK = "task"
    NOTIFICATION = "notification"
    SYSTEM = "system"


class ActivityType(StrEnum):
    CHAT = "chat"
    A2A = "a2a"
    TASK = "task"
    INTERNAL = "internal"
    HEARTBEAT = "heartbeat"
    RESPOND_IN_SESSION = "respond_in_session"


class Priority(IntEnum):
    CRITICAL = 0
    HIGH = 1
    NORMAL = 2
    LOW = 3
    BACKGROUND = 4


class Status(StrEnum):
    QUEUED = "queued"
    PROCESSING = "processing"
    COMPLETED = "completed"
    MERGED = "merged"
    DEFERRED = "deferred"
    DROPPED = "dropped"


STATUS_CHOICES = [(s.value, s.value) for s in Status]

# Status colours of the mind view (seed section 16).
STATUS_COLOURS: dict[Status, str] = {
    Status.QUEUED: "amber",
    Status.PROCESSING: "blue-pulse",
    Status.COMPLETED: "green",
    Status.MERGED: "blue",
    Status.DEFERRED: "purple",
    Status.DROPPED: "red",
}


# Upstream drops queued items older than 3 days at recovery; the default here too.
EXPIRES_AFTER = timedelta(days=3)
NEVER = None


@dataclass(frozen=True)
class MailboxTypeDescriptor:
    label: str
    default_priority: Priority
    category: Category
    icon: str
    activity_type: ActivityType | None  # None: decided at run time (see section 6.3)
    creates_activity: bool
    invokes_llm: bool
    # Enqueue-time dedup group key (section 14): a dotted path into the payload.
    dedup_key: str | None = None
    # At most one open item of this type per agent (heartbeat collapse): a new one is
    # discarded while one is queued (nothing appended to it) and dropped as a duplicate
    # while one is being processed, the reason recorded on it.
    one_queued: bool = False
    # A periodic check-in (from beat): a newer one of its type supersedes it in triage.
    periodic: bool = False
    # A queued item older than this is not worth a call any more: dropped with its
    # reason at recovery and when the loop reads the queue (``mailbox.expiry``). None:
    # never. Whatever somebody waits for never expires, whatever its type: a person's
    # item, an execution trigger, a review request, an item that asks for action.
    expires_after: timedelta | None = EXPIRES_AFTER


T = MailboxType
_D = MailboxTypeDescriptor
MAILBOX_TYPE_REGISTRY: dict[MailboxType, MailboxTypeDescriptor] = {
    T.SYSTEM_EVENT: _D("System Event", Priority.HIGH, Category.SYSTEM, "⚙", ActivityType.INTERNAL, True, True),
    T.HUMAN_CHAT: _D(
        "Chat", Priority.CRITICAL, Category.INTERACTION, "💬", ActivityType.CHAT, True, True, expires_after=NEVER
    ),
    T.TASK_COMMENT: _D(
        "Task Comment", Priority.NORMAL, Category.TASK, "💬", None, False, False, "taskId", expires_after=NEVER
    ),
    T.MENTION: _D(
        "Mention", Priority.HIGH, Category.INTERACTION, "@", ActivityType.CHAT, True, True, expires_after=NEVER
    ),
    T.SESSION_REPLY: _D(
        "Session Reply",
        Priority.HIGH,
        Category.TASK,
        "↩",
        ActivityType.RESPOND_IN_SESSION,
        True,
        True,
        expires_after=NEVER,
    ),
    T.TASK_STATUS_UPDATE: _D("Task Status", Priority.HIGH, Category.TASK, "📋", None, True, False),
    T.A2A_MESSAGE: _D(
        "Agent Message", Priority.NORMAL, Category.INTERACTION, "🔗", ActivityType.A2A, True, True, "extra.channelKey"
    ),
    T.REVIEW_REQUEST: _D(
        "Review Request", Priority.HIGH, Category.TASK, "👀", ActivityType.CHAT, True, True, expires_after=NEVER
    ),
    T.REQUIREMENT_COMMENT: _D(
        "Requirement Comment",
        Priority.NORMAL,
        Category.TASK,
        "💬",
        None,
        False,
        False,
        "requirementId",
        expires_after=NEVER,
    ),
    T.REQUIREMENT_UPDATE: _D(
        "Requirement Update", Priority.HIGH, Category.NOTIFICATION, "📝", ActivityType.INTERNAL, True, False
    ),
    T.DAILY_REPORT: _D(
        "Daily Report",
        Priority.NORMAL,
        Category.SYSTEM,
        "📊",
        ActivityType.INTERNAL,
        True,
        True,
        periodic=True,
        expires_after=timedelta(days=1),  # the next day's report covers it
    ),
    T.HEARTBEAT: _D(
        "Heartbeat",
        Priority.LOW,
        Category.SYSTEM,
        "♡",
        ActivityType.HEARTBEAT,
        True,
        True,
        one_queued=True,
        periodic=True,
        expires_after=timedelta(days=1),  # its interval is at most a day: a newer one comes
    ),
    T.MEMORY_CONSOLIDATION: _D(
        "Memory Consolidation",
        Priority.BACKGROUND,
        Category.SYSTEM,
        "🧠",
        ActivityType.INTERNAL,
        True,
        True,
        periodic=True,
    ),
    T.REMINDER: _D(
        "Reminder", Priority.NORMAL, Category.SYSTEM, "⏰", ActivityType.INTERNAL, True, True, expires_after=NEVER
    ),
    T.CALLBACK_RESULT: _D(
        "Callback Result", Priority.HIGH, Category.SYSTEM, "↪", ActivityType.A2A, True, True, "extra.channelKey"
    ),
}

# Types whose items a human may write; such an item is a user interaction when its
# sender's role is "user" (human_chat always is).
COMMENT_TYPES = frozenset({T.TASK_COMMENT, T.REQUIREMENT_COMMENT})
STATUS_UPDATE_TYPES = frozenset({T.TASK_STATUS_UPDATE, T.REQUIREMENT_UPDATE})
MESSAGE_SEPARATOR = "\n\n---\n\n"


# The registry by plain string, for the per-item lookups of the hot paths.
_BY_VALUE: dict[str, MailboxTypeDescriptor] = {t.value: d for t, d in MAILBOX_TYPE_REGISTRY.items()}


def descriptor(source_type: str) -> MailboxTypeDescriptor:
    """The type's descriptor; ValueError for an unknown type."""
    found = _BY_VALUE.get(source_type)
    return found if found is not None else MAILBOX_TYPE_REGISTRY[MailboxType(source_type)]


def is_known_type(value: object) -> bool:
    return isinstance(value, str) and value in MailboxType._value2member_map_


def type_choices() -> list[tuple[str, str]]:
    return [(t.value, d.label) for t, d in MAILBOX_TYPE_REGISTRY.items()]


def category_choices() -> list[tuple[str, str]]:
    return [(c.value, c.value.title()) for c in Category]


def types_in_category(category: str) -> list[str]:
    return [t.value for t, d in MAILBOX_TYPE_REGISTRY.items() if d.category == category]


def registry_for_ui() -> list[dict[str, object]]:
    """The registry as plain data for templates and the API (labels, icons, categories)."""
    return [
        {
            "type": t.value,
            "label": d.label,
            "icon": d.icon,
            "category": d.category.value,
            "defaultPriority": int(d.default_priority),
        }
        for t, d in MAILBOX_TYPE_REGISTRY.items()
    ]
