"""The offline brain: deterministic and rule-based, the embedded default.

It is honest about what it is (every reply says so, and the UI labels it), but it drives
every scenario end to end: it answers chats, executes tasks by calling tools, judges
interrupts by intent words, and ends non-chat output with the completion marker.

Each scenario is a short plan of tool steps; the next step is the first one whose tool
is offered and has not been called yet in this session. When no step is left, it writes
its final text from what the tools returned.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Any

from django.conf import settings

from . import offline_deliberation, offline_memory, offline_reports
from .base import CallContext, LLMCancelled, LLMResponse, Provider, ToolCall, Usage, without_context, word_chunks
from .offline_plan import LABEL, FinalFn, PlanFn, Step

# Scenario names (attention.scenarios) and tool names, as the LLM sees them.
HEARTBEAT = "check_in"  # the daily report and the dream: offline_reports.py, offline_memory.py
A2A, SESSION_RESPONSE, MENTION = "a2a", "session_response", "mention_response"
TASK_COMMENT_TOOL = "task_comment"  # a tool name, not a mailbox type
REQUIREMENT_COMMENT_TOOL = "requirement_comment"  # a tool name, not a mailbox type


# Demo mode: each turn takes MARKUS["OFFLINE_THINK_MS"] (env MARKUS_OFFLINE_THINK_MS; 0,
# the default, answers at once). It sleeps in steps of at most THINK_STEP_S, checking
# ``context.cancelled`` between them, so a pause or a stop still ends the turn.
THINK_STEP_S = 0.05


def think_seconds() -> float:
    try:
        return max(0.0, float(settings.MARKUS.get("OFFLINE_THINK_MS", 0) or 0) / 1000)
    except (TypeError, ValueError):
        return 0.0


def _think(seconds: float, context: CallContext) -> None:
    """Sleep ``seconds`` in small steps; raise LLMCancelled as soon as the call is cancelled."""
    if seconds <= 0:
        return
    deadline = time.monotonic() + seconds
    while True:
        if context.cancelled():
            raise LLMCancelled("the offline brain's turn was cancelled")
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(THINK_STEP_S, left))


CANCEL_WORDS = re.compile(r"\b(cancel|abort|stop|don't|do not|never mind|scrap)\b|取消", re.I)
PAUSE_WORDS = re.compile(r"\b(hold off|wait|pause|later|not now|postpone)\b|暂停", re.I)


def _unanswered_user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """What the person said since the agent last answered (an assistant message with
    text and no tool call): the chat's message and the follow-ups merged into it."""
    start = 0
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "assistant" and not m.get("tool_calls") and str(m.get("content") or "").strip():
            start = i + 1
            break
    return [str(m.get("content") or "") for m in messages[start:] if m.get("role") == "user"]


def _quoted(texts: list[str]) -> str:
    """“a”, “b” and “c”."""
    quoted = [f"“{t.strip()[:500]}”" for t in texts]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


# Tools that read what a person's next message may change (how many items wait): a
# follow-up merged in after such a read makes the brain read again before it answers.
FRESH_READS = frozenset({"check_mailbox"})


def _since_last_user(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            return messages[i:]
    return messages


def _called(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Tool name → its latest result text, for tools already called in this session."""
    names: dict[str, str] = {}
    by_id: dict[str, str] = {}
    for m in messages:
        for call in m.get("tool_calls") or []:
            by_id[call["id"]] = call["function"]["name"]
            names.setdefault(call["function"]["name"], "")
        if m.get("role") == "tool" and m.get("tool_call_id") in by_id:
            names[by_id[m["tool_call_id"]]] = str(m.get("content") or "")
    return names


# The scenarios whose plans live in their own modules, one per area (each keeps its own):
# their tool steps and their final texts, read from the areas' tables.
PLANS: dict[str, PlanFn] = {**offline_deliberation.PLANS, **offline_memory.PLANS, **offline_reports.PLANS}
FINALS: dict[str, FinalFn] = {**offline_deliberation.FINALS, **offline_memory.FINALS, **offline_reports.FINALS}


def _plan(scenario: str, item: dict[str, Any], agent: str) -> list[Step]:
    if scenario in PLANS:
        return PLANS[scenario](item, agent)
    task_id = item.get("taskId")
    summary = item.get("summary") or ""
    if scenario == "task_execution" and task_id:
        return [
            ("task_get", {"task_id": task_id}),
            (
                TASK_COMMENT_TOOL,
                {
                    "task_id": task_id,
                    "content": f"{agent} worked on this task: {summary}. Done as described; ready for review.",
                },
            ),
            ("task_submit_review", {"task_id": task_id, "summary": f"Completed: {summary}"}),
            ("update_working_memory", {"key": f"task:{task_id}", "content": f"Executed task {task_id}: {summary}"}),
        ]
    if scenario == "review" and task_id:
        return [
            ("task_get", {"task_id": task_id}),
            (TASK_COMMENT_TOOL, {"task_id": task_id, "content": f"Reviewed by {agent}: looks complete."}),
            ("task_update", {"task_id": task_id, "status": "completed"}),
        ]
    if scenario in ("comment_response", "requirement_action") and (task_id or item.get("requirementId")):
        if task_id:
            return [
                ("task_get", {"task_id": task_id}),
                (TASK_COMMENT_TOOL, {"task_id": task_id, "content": f"{agent} read the thread and noted it."}),
            ]
        rid = item.get("requirementId")
        return [
            ("requirement_get", {"requirement_id": rid}),
            (REQUIREMENT_COMMENT_TOOL, {"requirement_id": rid, "content": f"{agent} noted it."}),
        ]
    if scenario == MENTION and (task_id or item.get("requirementId")):
        return _mention_steps(item, agent)
    if scenario == A2A and item.get("expectsReply"):
        said = str(item.get("content") or "").strip()[:500]
        return [("agent_reply", {"text": f"This is {agent} ({LABEL}). I read your message: “{said}”."})]
    if scenario == SESSION_RESPONSE and task_id:
        note = f"{agent} read your comment on this finished task ({LABEL})."
        return [(TASK_COMMENT_TOOL, {"task_id": task_id, "content": note})]
    if scenario == HEARTBEAT:
        return [("check_mailbox", {}), ("recall_activity", {"limit": 10})]
    if scenario == "chat":
        return _chat_steps(str(item.get("content") or ""))
    return []


def _mention_steps(item: dict[str, Any], agent: str) -> list[Step]:
    """A mention is answered in the thread it came from, as a reply to the comment. The
    answer names nobody with an @: two agents mentioned together would otherwise mention
    each other back for ever."""
    who = f" {item['sender']}," if item.get("sender") else ""
    note = f"{agent} here ({LABEL}):{who} I read the thread and your mention; I have noted what it asks of me."
    reply = {"content": note, **({"reply_to_comment_id": item["commentId"]} if item.get("commentId") else {})}
    if item.get("taskId"):
        task_id = item["taskId"]
        return [("task_get", {"task_id": task_id}), (TASK_COMMENT_TOOL, {"task_id": task_id, **reply})]
    rid = item["requirementId"]
    return [("requirement_get", {"requirement_id": rid}), (REQUIREMENT_COMMENT_TOOL, {"requirement_id": rid, **reply})]


# What a person may ask of the offline brain in a chat, besides an answer: "remember
# that …" (memory_save), "remind me to … in 2h / tomorrow at 9" (schedule_reminder),
# "check in every 2 hours" (set_heartbeat_interval), "what is in your queue" (check_mailbox).
REMEMBER = re.compile(r"\bremember(?: that|:)?\s+(?P<what>.+)", re.I | re.S)
REMIND = re.compile(
    r"\bremind me (?:to |about |that )?(?P<what>.+?)\s+(?P<when>in \d+.*|tomorrow.*|today at .+|at \d.*)$", re.I | re.S
)
CHECK_IN_EVERY = re.compile(r"\bcheck in every (?P<n>\d+)\s*(?P<unit>min|minutes?|h|hours?)\b", re.I)


def _chat_steps(text: str) -> list[Step]:
    steps: list[Step] = []
    if m := REMIND.search(text):
        steps.append(("schedule_reminder", {"text": m["what"].strip(), "when": m["when"].strip().rstrip(".!")}))
    elif m := REMEMBER.search(text):
        steps.append(("memory_save", {"content": m["what"].strip()[:1000], "kind": "note"}))
    if m := CHECK_IN_EVERY.search(text):
        n = int(m["n"]) if len(m["n"]) <= 7 else 10**7  # the tool clamps; int() of a huge number raises
        minutes = n * (60 if m["unit"].lower().startswith("h") else 1)
        steps.append(("set_heartbeat_interval", {"minutes": minutes, "reason": "asked in a chat"}))
    if any(w in text.lower() for w in ("queue", "mailbox", "busy", "waiting")):
        steps.append(("check_mailbox", {}))
    return steps


# "What is the last commit in the git repository?": the git_log tool of an attached
# tool server (MCP), named ``<server>__git_log``: of the server the question names (by
# its name, or by the repository its description names), else the first offered; the
# repository is a path in the question, else the one its server's description names.
LAST_COMMIT = re.compile(r"\b(last|latest|newest|recent)\b.{0,40}\bcommits?\b", re.I | re.S)
PATH = re.compile(r"(/[\w.@%+~/-]+)")
SEPARATOR = "__"  # between a tool server's name and its tool's
GIT_LOG = "__git_log"
# A failing tool server's stand-in, after its name (markus.toolservers.offered.UNAVAILABLE).
UNAVAILABLE = "__unavailable"
#: The tools that find and load a tool server's tools on demand (markus.toolservers.on_demand).
TOOL_SEARCH, TOOL_LOAD = "tool_search", "tool_load"
# A server as its tools' descriptions end (``(Tool server <name>: <description>)``) and
# as tool_search's description lists it (``<name> (<description>; <n> tools)``).
SERVER_NOTE = re.compile(r"\(Tool server ([a-z0-9-]+): (.*)\)\s*$", re.S)
SERVER_LISTED = re.compile(r"(?:: |, )([a-z0-9]+(?:-[a-z0-9]+)*) \((.*?)(?:; )?\d+ tools?\)")
# How many git_log tools one tool_load asks for (on_demand.LOAD_MAX).
LOAD_MAX = 8


def _servers(tools: list[dict[str, Any]]) -> dict[str, str]:
    """The tool servers the offered tools come from: name → its description."""
    servers: dict[str, str] = {}
    for t in tools:
        name, description = t["function"]["name"], str(t["function"].get("description") or "")
        if SEPARATOR in name:
            note = SERVER_NOTE.search(description)
            servers.setdefault(name.split(SEPARATOR, 1)[0], note.group(2) if note else "")
        elif name == TOOL_SEARCH:
            for listed in SERVER_LISTED.finditer(description):
                servers.setdefault(listed.group(1), listed.group(2))
    return servers


def _says(text: str, word: str) -> bool:
    return bool(word) and re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, re.I) is not None


def _named(text: str, servers: dict[str, str]) -> str | None:
    """The server the question names: by its name (the longest that matches), else by
    the repository its description names (the last part of a path in it)."""
    for name in sorted(servers, key=len, reverse=True):
        if _says(text, name):
            return name
    for name, description in servers.items():
        if any(_says(text, path.rstrip("/.,;:").rsplit("/", 1)[-1]) for path in PATH.findall(description)):
            return name
    return None


def _tool_steps(text: str, tools: list[dict[str, Any]]) -> list[Step]:
    """The git_log of the server the question names (or the first), then every failing
    server's stand-in (``<server>__unavailable``: its call says why); if the named server
    is the failing one, only its stand-in: no other repository is read in its place."""
    if not LAST_COMMIT.search(text):
        return []
    servers = _servers(tools)
    named = _named(text, servers)
    failing = [t["function"]["name"] for t in tools if t["function"]["name"].endswith(UNAVAILABLE)]
    if f"{named}{UNAVAILABLE}" in failing:  # should it start now, its git_log is loaded
        failing = [f"{named}{UNAVAILABLE}"]
        tools = [t for t in tools if t["function"]["name"].startswith(f"{named}{SEPARATOR}")]
    return [*_git_log(text, tools, named, servers), *((name, {}) for name in failing)]


def _git_log(text: str, tools: list[dict[str, Any]], named: str | None, servers: dict[str, str]) -> list[Step]:
    logs = [t["function"] for t in tools if t["function"]["name"].endswith(GIT_LOG)]
    for fn in sorted(logs, key=lambda fn: fn["name"] != f"{named}{GIT_LOG}"):  # the named server's first
        where = PATH.search(text) or PATH.search(str(fn.get("description") or ""))
        args: dict[str, Any] = {"max_count": 1}
        if where or "repo_path" in (fn.get("parameters") or {}).get("required", []):
            args["repo_path"] = where.group(1).rstrip(".,;:") if where else "."
        return [(fn["name"], args)]
    if any(t["function"]["name"] == TOOL_LOAD for t in tools):  # the servers' tools are found on demand
        names = [f"{s}{GIT_LOG}" for s in ([named] if named else list(servers)[:LOAD_MAX])]
        return [(TOOL_LOAD, {"names": names or [GIT_LOG.removeprefix(SEPARATOR)]})]
    return []


def _error(said: str) -> str | None:
    """A tool result's error, or None if it has none."""
    try:
        answer = json.loads(said or "{}")
    except ValueError:
        return said
    if not isinstance(answer, dict):
        return said
    return str(answer["error"]) if "error" in answer else None


def _tool_notes(results: dict[str, str]) -> str:
    """What the tool servers' tools said, as a person reads it (a failing server's
    stand-in: why it is failing)."""
    notes = []
    for name, said in results.items():
        if name.endswith(UNAVAILABLE) and (error := _error(said)) is not None:
            notes.append(f"I could not use one of my tool servers: {error[:300]}.")
        elif name.endswith(GIT_LOG):
            notes.insert(0, _log_note(name, said))
    return " ".join(notes)


def _log_note(name: str, said: str) -> str:
    error = _error(said)
    if error is not None:
        return f"I could not read the repository ({name}): {error[:300]}"
    log = str(json.loads(said or "{}").get("content") or "")
    subject = re.search(r"^Message: (.+)$", log, re.M)
    commit = re.search(r"^Commit: (\w{7})", log, re.M)
    author = re.search(r"^Author: (.+)$", log, re.M)
    if subject is None:
        return "The repository has no commits yet." if not log.strip() else f"The log says: {log[:300]}"
    who = f", by {author.group(1).strip()}" if author else ""
    return f"The last commit is “{subject.group(1).strip()}” ({commit.group(1) if commit else '?'}{who})."


def _when(value: Any) -> str:
    """An ISO time as a person reads it: 2026-12-02 09:00 (+09:00)."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return str(value)
    offset = moment.strftime("%z")
    return moment.strftime("%Y-%m-%d %H:%M") + (f" ({offset[:3]}:{offset[3:]})" if offset else "")


def _chat_notes(results: dict[str, str]) -> str:
    """What the chat's tools did, in a sentence each (their errors as they said them)."""
    notes = []
    for name, said in (
        ("memory_save", "I saved that to my long-term memory."),
        ("schedule_reminder", "I set a reminder for {remindAt}."),
        ("set_heartbeat_interval", "I will check in every {intervalMinutes} minutes."),
    ):
        if name not in results:
            continue
        try:
            answer = json.loads(results[name] or "{}")
        except ValueError:
            answer = None
        if isinstance(answer, dict) and "error" not in answer:
            notes.append(said.format_map({**answer, "remindAt": _when(answer.get("remindAt"))}))
        else:
            notes.append(f"I could not do that ({name}): {results[name][:300]}")
    return " ".join(notes)


def _final_text(scenario: str, item: dict[str, Any], agent: str, results: dict[str, str], user_texts: list[str]) -> str:
    if scenario in FINALS:
        return FINALS[scenario](item, agent, results)
    if scenario == "chat":
        said = [t for t in user_texts if t.strip()] or [""]
        which = "message" if len(said) == 1 else "messages"
        reply = f"Hello, this is {agent} ({LABEL}). I read your {which}: {_quoted(said)}."
        if "check_mailbox" in results:
            depth = json.loads(results["check_mailbox"] or "{}").get("queueDepth", 0)
            reply += f" I have {depth} item(s) waiting in my mailbox."
        notes = " ".join(n for n in (_tool_notes(results), _chat_notes(results)) if n)
        return f"{reply} {notes}" if notes else reply
    if scenario == HEARTBEAT:
        depth = json.loads(results.get("check_mailbox") or "{}").get("queueDepth", 0)
        acts = json.loads(results.get("recall_activity") or "{}").get("activities", [])
        ok = sum(1 for a in acts if a.get("success"))
        did = f"{len(acts)} recent activities ({ok} succeeded)"
        return f"Heartbeat check-in: {did}, {depth} item(s) queued."
    summary = item.get("summary") or scenario
    return f"{agent} handled “{summary}” ({LABEL})."


class OfflineProvider(Provider):
    name = "offline"
    judges = True

    @property
    def local(self) -> bool:  # type: ignore[override]
        """Rules over the messages, answered at once, unless demo mode makes it think."""
        return think_seconds() == 0

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        think = think_seconds()
        offered = {t["function"]["name"] for t in tools}
        messages = without_context(messages)  # the loop's context note is nobody's words
        # A session reply resumes the task's session: only what happened since the
        # person's comment counts as done in this run.
        results = _called(_since_last_user(messages) if context.scenario == SESSION_RESPONSE else messages)
        # In a chat, a read made before the person's latest message is read again.
        fresh = _called(_since_last_user(messages)) if context.scenario == "chat" else results
        steps = _plan(context.scenario, context.item, context.agent_name)
        if context.scenario == "chat":
            steps += _tool_steps(str(context.item.get("content") or ""), tools)
        for name, args in steps:
            if name in offered and name not in (fresh if name in FRESH_READS else results):
                n = sum(1 for m in messages if m.get("role") == "assistant")
                _think(think, context)
                return LLMResponse(
                    text="",
                    tool_calls=[ToolCall(id=f"off_{n}", name=name, arguments=args)],
                    usage=Usage(prompt_tokens=_tokens(system, messages), completion_tokens=8),
                )
        text = _final_text(
            context.scenario, context.item, context.agent_name, results, _unanswered_user_texts(messages)
        )
        chunks = word_chunks(text)
        for chunk in chunks:  # streamed in word chunks to whoever listens, over the think time
            _think(think / max(1, len(chunks)), context)
            context.emit(chunk)
        return LLMResponse(
            text=text, usage=Usage(prompt_tokens=_tokens(system, messages), completion_tokens=len(text.split()))
        )

    triages = True
    deliberates = True

    def judge(self, *, current: dict[str, Any], new: dict[str, Any], context: CallContext) -> str:
        text = f"{new.get('summary', '')} {new.get('content', '')}"
        if CANCEL_WORDS.search(text):
            return "cancel"
        if PAUSE_WORDS.search(text):
            return "preempt"
        if current.get("taskId") and current.get("taskId") == new.get("taskId"):
            return "merge"
        return "continue"


def _tokens(system: str, messages: list[dict[str, Any]]) -> int:
    """A rough, deterministic token count (words), so activities carry real numbers."""
    return len(system.split()) + sum(len(str(m.get("content") or "").split()) for m in messages)


# Scenario plans kept in their own modules register themselves (``register``) on import.
