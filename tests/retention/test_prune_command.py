"""``manage.py prune``: it prints per table what it removed, ``--dry-run`` prints the
same counts and removes nothing, deletes go in batches of BATCH_SIZE (each its own
transaction), and every run is recorded for the console."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from attention.models import AgentActivityLog, AgentDecision
from mailbox.models import MailboxItem
from markus.retention.models import PruneRun
from markus.retention.services import TABLES

from .rows import item, with_history

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def run_prune(*args: str) -> dict[str, int]:
    out = StringIO()
    call_command("prune", *args, stdout=out)
    counts = dict(re.findall(r"^\s+(\w+)\s+(\d+)", out.getvalue(), flags=re.MULTILINE))
    return {table: int(n) for table, n in counts.items()}


@pytest.fixture
def old_work(agent):
    for _ in range(5):
        with_history(item(agent), logs=2)


def test_dry_run_prints_the_counts_per_table_and_removes_nothing(old_work):
    printed = run_prune("--dry-run")

    assert printed == {
        "agent_activity_logs": 10,
        "agent_activities": 5,
        "agent_decisions": 5,
        "tool_calls": 5,
        "llm_sessions": 5,
        "mailbox_items": 5,
        "agentbus_chunks": 0,
        "agentbus_outbox": 0,
        "agentbus_audit": 0,
        "total": 35,
    }
    assert MailboxItem.objects.count() == 5 and AgentActivityLog.objects.count() == 10
    run = PruneRun.objects.get()
    assert run.dry_run and run.trigger == PruneRun.Trigger.COMMAND and run.batches == 0


def test_the_real_run_removes_what_the_dry_run_counted(old_work):
    counted = run_prune("--dry-run")
    removed = run_prune()
    assert removed == counted
    assert MailboxItem.objects.count() == 0 and AgentDecision.objects.count() == 0
    assert run_prune("--dry-run")["total"] == 0


def test_a_small_batch_size_deletes_in_several_batches(old_work, settings):
    settings.MARKUS = {**settings.MARKUS, "RETENTION": {**settings.MARKUS["RETENTION"], "BATCH_SIZE": 2}}
    run_prune()
    run = PruneRun.objects.get()
    # Items go two at a time (2, 2, 1); per such batch its 4 (or 2) logs in two batches (one),
    # then its activities, decisions, tool calls, sessions and the items, a batch each.
    assert run.batches == (2 + 5) + (2 + 5) + (1 + 5)
    assert run.counts["mailbox_items"] == 5 and MailboxItem.objects.count() == 0


def test_the_batch_size_can_be_given_on_the_command_line(old_work):
    run_prune("--batch-size", "4")
    assert PruneRun.objects.get().batches == (2 + 5) + (1 + 5)  # items 4 and 1: logs 8 (two batches) and 2


def test_a_batch_size_below_one_is_refused(old_work):
    with pytest.raises(CommandError, match="BATCH_SIZE"):
        run_prune("--batch-size", "0")
    assert MailboxItem.objects.count() == 5


def test_every_table_of_the_policy_is_printed_even_at_zero():
    printed = run_prune()
    assert set(printed) == {*TABLES, "total"} and printed["total"] == 0
