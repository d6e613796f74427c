"""The messages of an item's LLM session that the loop writes: the opening messages
(``first_messages``: a chat's history, or the item's header and content), a merged item as
the next turn reads it (``merged_message``), and the context note (``context_message``,
compared without its time by ``same_context``, found again by ``last_context``)."""

from __future__ import annotations

import json
import re
from typing import Any

from mailbox.models import MailboxItem
from markus.agents.models import ChatMessage
from markus.llm.base import CONTEXT_MARK, CONTEXT_MARKS, context_at, split_at_context

from .scenarios import NOW, row, row_for

#: How each of the loop's own notes to the model begins, at the start of a line: a
#: retry's failed attempts, the calls an earlier attempt made, a missing verdict, a call
#: repeated without progress. Never anyone's words, and never an answer
#: (``only_repeats_a_note``).
NOTE_MARK = "[note]"
_NOTE_AT = re.compile(r"^" + re.escape(NOTE_MARK), re.M)
#: A line of the note on an item's failed attempts (``session.failed_attempts_note``).
_ATTEMPT_FAILED = re.compile(r"^Attempt \d+ failed: (.+)$")


def attempt_failed(n: int, reason: str) -> str:
    """The line of the failed attempts' note that says why attempt ``n`` failed."""
    return f"Attempt {n} failed: {reason}."


def context_message(lines: list[str]) -> dict[str, Any]:
    """``context_lines`` as the loop's note (not a person's words), appended to the
    session whenever it changed (``tool_loop``)."""
    return {"role": "user", "content": "\n".join([CONTEXT_MARK, *lines])}


def same_context(a: str, b: str) -> bool:
    """Whether two context notes say the same, the time they were written apart and
    whichever mark they carry (a session stored under an older mark)."""

    def rest(note: str) -> list[str]:
        return [line for line in note.splitlines() if not line.startswith(NOW) and line not in CONTEXT_MARKS]

    return rest(a) == rest(b)


def without_echoed_context(answer: str, messages: list[dict[str, Any]]) -> str:
    """The answer without the loop's context note where the model repeated it (a small
    model answers a person with the note it was given, or with one it remembers): when
    the answer carries the note's mark, each mark and the note-shaped lines after it (its
    time, its ``## `` headings, their ``- `` lines, blank lines) are left out, and so is
    any line of a note in the ``messages`` it was sent. "" when nothing else was said."""
    if context_at(answer) == -1:
        return answer
    noted = {line.strip() for m in messages for line in _note_of(m).splitlines()}
    kept: list[str] = []
    in_note = False
    for line in answer.splitlines():
        bare = line.strip()
        if bare in CONTEXT_MARKS:
            in_note = True
        elif in_note and (not bare or bare.startswith((NOW, "## ", "- "))):
            pass
        elif bare not in noted:
            in_note = False
            kept.append(line)
    return "\n".join(kept).strip()


def written_as_a_note(answer: str) -> bool:
    """Whether the answer opens with the loop's own mark (``NOTE_MARK``): the model wrote
    as the loop (a small model copied a note's first line, then made up lines of its
    own), which is never its word to a person, whatever follows."""
    return answer.lstrip().startswith(NOTE_MARK)


#: An answer in a code fence, its language named or not.
_IN_FENCE = re.compile(r"\A```\w*\s*(.*?)\s*```\Z", re.S)


def says_nothing(answer: str, messages: list[dict[str, Any]]) -> str | None:
    """The empty JSON value (``[]``, ``{}``, ``null``, ``""``) that is the whole answer,
    fenced or not, else None: a small model answered an agent's request with "[]",
    nothing said in JSON's words. Not when the ``messages`` it answers asked for JSON
    (a user message, the loop's context note left out, that names it): then "[]" says
    that there is none."""
    fenced = _IN_FENCE.match(answer)
    text = fenced.group(1) if fenced else answer
    if len(text) > 8:  # longer than any empty value with a space or two: not one
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if value not in ([], {}, None, "") or any(_asks_for_json(m) for m in messages):
        return None
    return text


def _asks_for_json(message: dict[str, Any]) -> bool:
    said = split_at_context(str(message.get("content") or ""))[0]
    return message.get("role") == "user" and "json" in said.lower()


def only_repeats_a_note(answer: str, messages: list[dict[str, Any]]) -> bool:
    """Whether each line of the answer is a line of one of the loop's own notes in the
    ``messages`` it was sent, or the reason such a note gave for a failed attempt, its
    case and closing full stop aside (a small model answered with the last line of the
    note on its failed attempt; another with the reason, capitalised). A note begins at
    ``NOTE_MARK`` and runs to its message's end."""
    lines = [_bare(line) for line in answer.splitlines() if line.strip()]
    if not lines:
        return False
    noted: set[str] = set()
    for message in messages:
        content = str(message.get("content") or "")
        if found := _NOTE_AT.search(content):
            for line in content[found.start() :].splitlines():
                noted.add(_bare(line))
                if reason := _ATTEMPT_FAILED.match(line.strip()):
                    noted.add(_bare(reason.group(1)))
    return all(line in noted for line in lines)


def _bare(line: str) -> str:
    return line.strip().rstrip(".").strip().casefold()


def _note_of(message: dict[str, Any]) -> str:
    return split_at_context(str(message.get("content") or ""))[1]


def last_context(messages: list[dict[str, Any]]) -> str:
    """The latest context note in a session (a message of its own, or after a tool
    result in it); "" when there is none."""
    return next((note for message in reversed(messages) if (note := _note_of(message))), "")


def first_messages(item: MailboxItem, scenario: str, chat_session_id: str | None) -> list[dict[str, Any]]:
    """The opening messages of a new LLM session for the item."""
    messages: list[dict[str, Any]] = []
    if row(scenario).in_chat and chat_session_id:
        history = ChatMessage.objects.filter(
            session_id=chat_session_id, role__in=[ChatMessage.Role.USER, ChatMessage.Role.ASSISTANT]
        ).order_by("-created_at", "-id")[:20]
        # An answer stored before such echoes were refused may carry the loop's note:
        # sent again, the model took it for a reply to copy.
        said = [(m.role, _as_said(m)) for m in reversed(list(history))]
        messages += [{"role": role, "content": content} for role, content in said if content]
        messages.append({"role": "user", "content": _with_notify_context(item)})
        return messages
    header = f"[{item.label}] {item.summary}".strip()
    if item.task_id:
        header += f" (task {item.task_id})"
    if item.requirement_id:
        header += f" (requirement {item.requirement_id})"
    messages.append({"role": "user", "content": f"{header}\n\n{item.content}".strip()})
    return messages


def _as_said(message: ChatMessage) -> str:
    """A message of the chat's history as the model reads it again. A reply the loop
    wrote when it gave up (``metadata.failed``) is the loop's note, not the model's word:
    the real small model, asked again, answered with it at once, word for word (a copy
    of a note is no answer: ``only_repeats_a_note``)."""
    text = split_at_context(message.content)[0]
    if text and message.role == ChatMessage.Role.ASSISTANT and (message.metadata or {}).get("failed"):
        return f"{NOTE_MARK} No answer was given to the message above; the person was told:\n{text}"
    return text


def _with_notify_context(item: MailboxItem) -> str:
    """A person's reply to a notification the agent sent about a task or requirement
    names what it is about (the chat item carries ``metadata.notifyContext``)."""
    context = (item.metadata or {}).get("notifyContext") or {}
    about = [
        f"{kind} {context[key]}"
        for kind, key in (("task", "taskId"), ("requirement", "requirementId"))
        if context.get(key)
    ]
    if not about:
        return item.content
    return f"(replying to your notification about {' / '.join(about)})\n\n{item.content}"


def merged_message(item: MailboxItem) -> dict[str, Any]:
    """How a merged item reaches the next LLM turn."""
    sender = (item.metadata or {}).get("senderName") or "someone"
    if row_for(item).in_chat:  # a person's own words
        return {"role": "user", "content": item.content}
    return {"role": "user", "content": f"[{item.label} from {sender}] {item.summary}\n\n{item.content}".strip()}
