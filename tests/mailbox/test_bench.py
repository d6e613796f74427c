"""``manage.py bench mailbox`` measures service and bare SQL in one run, counts the
statements per item, returns its figures for the table and cleans up."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command

from mailbox.models import MailboxItem
from markus.agents.models import Agent
from markus.bench import mailbox as mailbox_bench
from markus.bench.report import Figure

pytestmark = pytest.mark.django_db
LINE = (
    r"{}: service (\d+)/s, bare SQL (\d+)/s, ratio service/bare (\d+\.\d\d)"
    r" \(median of the rounds; of the totals (\d+\.\d\d)\)"
)


def test_the_mailbox_bench_prints_rates_and_ratios_and_leaves_no_rows(agent):
    out = io.StringIO()
    call_command("bench", "mailbox", "--n", "50", stdout=out)
    text = out.getvalue()
    assert "50 items per phase" in text
    for phase in ("enqueue", "dequeue"):
        match = re.search(LINE.format(phase), text)
        assert match, f"no {phase} line in:\n{text}"
        service, bare, ratio, of_totals = int(match[1]), int(match[2]), float(match[3]), float(match[4])
        assert service > 0 and bare > 0 and ratio > 0
        assert of_totals == pytest.approx(service / bare, abs=0.02)
    assert "statements: 1 per enqueue (bare 1), 2 per claim + complete (bare 2)" in text
    assert re.search(r"enqueue through the service / bare INSERT \(\w+\)\s+\d\.\d+ x\s+>= 0\.900 x", text), text
    assert re.search(r"claim \+ complete through the service / bare SQL \(\w+\)\s+\d\.\d+ x\s+>= 0\.750 x", text)
    assert list(Agent.objects.values_list("id", flat=True)) == [agent.id]
    assert not MailboxItem.objects.exists()


def test_the_mailbox_bench_returns_ratios_with_goals_and_statement_counts(agent):
    figures = mailbox_bench.run(io.StringIO(), {"n": 20})
    assert all(isinstance(f, Figure) and f.suite == "mailbox" for f in figures)
    enqueue, dequeue, per_enqueue, per_dequeue = figures
    assert (enqueue.unit, enqueue.goal, enqueue.better) == ("x", 0.9, "higher")
    assert (dequeue.unit, dequeue.goal, dequeue.better) == ("x", 0.75, "higher")
    assert enqueue.value > 0 and dequeue.value > 0
    assert "bare INSERT" in enqueue.baseline and "bare UPDATE" in dequeue.baseline
    assert (per_enqueue.value, per_enqueue.goal, per_enqueue.better) == (1, 1, "lower")
    assert (per_dequeue.value, per_dequeue.goal, per_dequeue.better) == (2, 2, "lower")
    assert per_enqueue.meets_goal and per_dequeue.meets_goal
    assert not MailboxItem.objects.exists()


def test_the_bench_command_refuses_an_unknown_suite():
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("bench", "nonsense")
