"""``manage.py bench mailbox`` measures service and bare SQL in one run and cleans up."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command

from mailbox.models import MailboxItem
from markus.agents.models import Agent

pytestmark = pytest.mark.django_db
LINE = r"{}: service (\d+)/s, bare SQL (\d+)/s, ratio service/bare (\d+\.\d\d)"


def test_the_mailbox_bench_prints_rates_and_ratios_and_leaves_no_rows(agent):
    out = io.StringIO()
    call_command("bench", "mailbox", "--n", "50", stdout=out)
    text = out.getvalue()
    assert "50 items per phase" in text
    for phase in ("enqueue", "dequeue"):
        match = re.search(LINE.format(phase), text)
        assert match, f"no {phase} line in:\n{text}"
        service, bare, ratio = int(match[1]), int(match[2]), float(match[3])
        assert service > 0 and bare > 0
        assert ratio == pytest.approx(service / bare, abs=0.02)
    assert list(Agent.objects.values_list("id", flat=True)) == [agent.id]
    assert not MailboxItem.objects.exists()


def test_the_bench_command_refuses_an_unknown_suite():
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("bench", "nonsense")
