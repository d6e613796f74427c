"""Scenario 12: kill -9 a worker right after a side-effecting tool's effect commits, many
times, and count every effect by the marker in the tool's arguments (ARCHITECTURE
decision 14: a tool that changes the world runs exactly once per decision of the model).

People ask three agents in chats for one effect each (``EFFECT <tool> <marker>``: a
comment on a task, a message to a colleague, an observation, a notification, a task
delegated to a colleague, a reminder); the LLM stub (the real openai SDK path) makes
the call in the chat's first turn and answers in the next. A trigger on the scenario's
own database NOTIFYs the test at the commit of each row that carries a marker, with the
writer's application_name; the test SIGKILLs that worker at once (then restarts it).

Counted at the end, per marker: comments, bus messages and the mailbox items they
create for the colleague, observations, notifications, delegated tasks, reminders:
each exactly once (a duplicate is an effect made twice, a missing one an effect lost
although its chat was answered as done); and every chat answered exactly once (a reply
that says it could not be finished counts)."""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from .figures import assert_invariants, collect, settle
from .harness import Api, Cluster, boot

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

TOOLS = (
    "task_comment",
    "agent_send_message",
    "memory_save",
    "notify_user",
    "agent_delegate_task",
    "schedule_reminder",
)
ASKERS = 3
ROUNDS = 2  # chats per tool per asker
KILLS = 8
TABLES = (
    "task_comments",
    "agentbus_chunks",
    "memory_observations",
    "user_notifications",
    "tasks",
    "mailbox_items",
)
NOTIFY_ON_EFFECT = """
CREATE FUNCTION faults_effect_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF row_to_json(NEW)::text LIKE '%mkr-%' THEN
    PERFORM pg_notify('faults_effect', json_build_object(
      'table', TG_TABLE_NAME, 'app', current_setting('application_name'))::text);
  END IF;
  RETURN NEW;
END $$;
""" + "".join(
    f"CREATE TRIGGER faults_effect_{t} AFTER INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION faults_effect_written();\n"
    for t in TABLES
)


def marker(tool: str, asker: str, n: int) -> str:
    return f"mkr-{tool.replace('_', '')}-{asker}-{n}"


def ask_all(api: Api, askers: list[str], colleague: dict[str, str], task: dict[str, str]) -> dict[str, str]:
    """Post every chat (spread over a few seconds); returns marker -> tool."""
    asked: dict[str, str] = {}
    for n in range(ROUNDS):
        for tool in TOOLS:
            for agent in askers:
                m = marker(tool, agent, n)
                target = task[agent] if tool == "task_comment" else colleague[agent]
                text = f"EFFECT {tool} {m} {target}"
                status, answer = api.post(
                    f"/api/agents/{agent}/mailbox",
                    {"sourceType": "human_chat", "payload": {"summary": text[:60], "content": text}},
                )
                assert status < 300, answer
                asked[m] = tool
                time.sleep(0.08)
    return asked


def kill_after_effects(cluster: Cluster, kills: int, within: float, until_done: callable) -> list[str]:
    """Kill a worker at the commit of a row carrying a marker, ``kills`` times (then
    restart it), while the chats are being answered."""
    done: list[str] = []
    spare_until = 0.0  # the restarted worker gets a few seconds before it is a victim again
    deadline = time.monotonic() + within
    with cluster.pg.connect(cluster.db_name) as listener:
        listener.execute("LISTEN faults_effect")
        while len(done) < kills and time.monotonic() < deadline and not until_done():
            for note in listener.notifies(timeout=0.5, stop_after=1):
                row = json.loads(note.payload)
                name = str(row["app"]).removeprefix("faults-")
                if name not in ("w1", "w2") or time.monotonic() < spare_until:
                    continue
                cluster.kill(name)
                done.append(f"{row['table']}@{name}")
                cluster.start_worker(name)
                spare_until = time.monotonic() + 2.5
    return done


def effects(asked: dict[str, str]) -> dict[str, Counter]:
    """Per kind of effect, how many rows each marker left."""
    from agentbus.models import Chunk
    from mailbox.models import MailboxItem
    from mailbox.registry import MESSAGE_SEPARATOR
    from markus.memory.models import Observation
    from markus.work.models import Task, TaskComment
    from notifications.models import UserNotification as Notification

    found = {
        k: Counter()
        for k in ("comment", "bus message", "colleague's item", "observation", "notification", "task", "reminder")
    }

    def count(kind: str, texts, tool: str) -> None:
        for text in texts:
            for m, t in asked.items():
                if t == tool and m in str(text):
                    found[kind][m] += 1

    count("comment", TaskComment.objects.values_list("content", flat=True), "task_comment")
    bus = Chunk.objects.exclude(stream__id__startswith="outbox.").values_list("payload", flat=True)
    count("bus message", (json.dumps(p) for p in bus), "agent_send_message")
    a2a = MailboxItem.objects.filter(source_type="a2a_message").values_list("payload", flat=True)
    # Only an item's own message: a survivor of a merge carries the others' text too.
    own = (str(p.get("content", "")).split(MESSAGE_SEPARATOR)[0] for p in a2a)
    count("colleague's item", own, "agent_send_message")
    count("observation", Observation.objects.values_list("content", flat=True), "memory_save")
    count("notification", Notification.objects.values_list("body", flat=True), "notify_user")
    count("task", Task.objects.values_list("title", flat=True), "agent_delegate_task")
    reminders = MailboxItem.objects.filter(source_type="reminder").values_list("payload", flat=True)
    count("reminder", (str(p.get("content", "")) for p in reminders), "schedule_reminder")
    return found


EXPECTED = {
    "task_comment": ["comment"],
    "agent_send_message": ["bus message", "colleague's item"],
    "memory_save": ["observation"],
    "notify_user": ["notification"],
    "agent_delegate_task": ["task"],
    "schedule_reminder": ["reminder"],
}


def chat_answers(askers: list[str]) -> tuple[Counter, set[str], dict[str, str]]:
    """(replies per chat item, the chats whose reply says they failed, chat item ->
    its text)."""
    from mailbox.models import MailboxItem
    from markus.agents.models import ChatMessage

    chats = {
        i: str(p.get("content", ""))
        for i, p in MailboxItem.objects.filter(agent_id__in=askers, source_type="human_chat").values_list(
            "id", "payload"
        )
    }
    replies: Counter = Counter()
    failed: set[str] = set()
    for meta in ChatMessage.objects.filter(role="assistant", session__agent_id__in=askers).values_list(
        "metadata", flat=True
    ):
        for i in (meta or {}).get("mailboxItemIds", []):
            replies[i] += 1
            if (meta or {}).get("failed"):
                failed.add(i)
    return Counter({i: replies.get(i, 0) for i in chats}), failed, chats


def cancel_reminders() -> int:
    """The reminders wait for hours: cancelled once counted, so the work can settle."""
    from markus.reports.reminders import PENDING, reminder_cancel, reminder_state, reminders_of

    n = 0
    for agent_id in {"ag1", "ag2", "ag3"}:
        for item in reminders_of(agent_id):
            if reminder_state(item) == PENDING:
                reminder_cancel(agent_id=agent_id, item_id=item.id, by="faults")
                n += 1
    return n


def test_kill_9_right_after_a_tool_effect_commits_makes_every_effect_once(cluster, report, clock):
    from markus.work.models import Task

    cluster.sql(NOTIFY_ON_EFFECT)
    seeded = boot(cluster, agents=ASKERS + 1)
    askers = seeded.agents[:ASKERS]
    colleague = {a: seeded.agents[(i + 1) % len(seeded.agents)] for i, a in enumerate(askers)}
    api = Api(cluster.base, seeded.token)
    task = {}
    for agent in askers:  # a task each asker reviews, so it may comment on it
        status, body = api.post(
            "/api/tasks/", {"title": f"Work reviewed by {agent}", "assigneeId": colleague[agent], "reviewerId": agent}
        )
        assert status == 201, body
        task[agent] = body["id"]

    import threading

    asked: dict[str, str] = {}
    poster = threading.Thread(target=lambda: asked.update(ask_all(api, askers, colleague, task)), daemon=True)
    poster.start()

    def all_answered() -> bool:
        if poster.is_alive():
            return False
        replies, _, _ = chat_answers(askers)
        return bool(replies) and all(n >= 1 for n in replies.values())

    kills = kill_after_effects(cluster, KILLS, within=120, until_done=all_answered)
    poster.join(60)
    deadline = time.monotonic() + 120
    while not all_answered() and time.monotonic() < deadline:
        time.sleep(0.5)
    found = effects(asked)
    cancelled = cancel_reminders()
    settled = settle(120)
    replies, failed, chats = chat_answers(askers)
    figures = collect(others="n/a")

    twice, lost, made = [], [], 0
    for m, tool in asked.items():
        chat_ids = [i for i, text in chats.items() if m in text]
        gave_up = any(i in failed for i in chat_ids)
        for kind in EXPECTED[tool]:
            n = found[kind].get(m, 0)
            made += n == 1
            if n > 1:
                twice.append(f"{kind}:{m}x{n}")
            elif n == 0 and not gave_up:
                lost.append(f"{kind}:{m}")
    unanswered = [i for i, n in replies.items() if n == 0]
    answered_twice = [i for i, n in replies.items() if n > 1]
    figures.extra = (
        f"kills={len(kills)}({','.join(Counter(k.split('@')[0] for k in kills).elements())}) "
        f"chats={len(chats)} effects_once={made} effects_twice={len(twice)} effects_lost={len(lost)} "
        f"chats_answered_once={sum(1 for n in replies.values() if n == 1)} chats_answered_twice={len(answered_twice)} "
        f"chats_unanswered={len(unanswered)} failure_replies={len(failed)} reminders_cancelled={cancelled} "
        f"tasks_delegated={Task.objects.filter(title__startswith='delegated ').count()}"
    )
    report(figures.line("12 kill-after-tool-effect", clock()))
    assert len(kills) >= KILLS // 2, f"only {len(kills)} kills landed after a tool's effect"
    assert not twice, f"effects made twice: {twice[:10]}"
    assert not lost, f"effects lost: {lost[:10]}"
    assert not unanswered, f"chats never answered: {unanswered[:10]}"
    assert not answered_twice, f"chats answered twice: {answered_twice[:10]}"
    assert_invariants(figures, settled)
