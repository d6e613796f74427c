"""``manage.py bench scale``: a list of cases (``markus.bench.scale.CASES``), each a
module ``markus.bench.scale_<case>`` run in turn; a case that crashes is reported and
the others still give their figures. The ``queue`` case, at sizes small enough for a
test, gives each figure beside its baseline from the same run."""

from __future__ import annotations

import io
import sys
import types
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from markus.bench import scale, scale_queue
from markus.bench.report import Figure

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scale_queue, "SIZES", (24, 60))
    monkeypatch.setattr(scale_queue, "AGENTS", (1, 3))
    monkeypatch.setattr(scale_queue, "READS", 3)
    monkeypatch.setattr(scale_queue, "SWEEPS", 2)
    monkeypatch.setattr(scale_queue, "PAGES", 3)
    monkeypatch.setattr(scale_queue, "LOOP_ITEMS", 3)
    monkeypatch.setattr(scale, "CASES", ["queue"])


def test_the_queue_case_prints_every_figure_beside_its_baseline(small) -> None:
    out = io.StringIO()
    call_command("bench", "scale", stdout=out)
    text = out.getvalue()
    for size in (24, 60):
        for agents in ("1 agent", "3 agents"):
            where = f"{size} queued, {agents}"
            assert f"loop throughput / bare claim+complete, {where}" in text
            if connection.vendor == "sqlite":  # in this process: the database's CPU is the thread's
                assert f"loop CPU / bare claim+complete CPU, {where}" in text
            assert f"queue read / bare head SELECT, {where}" in text
            assert f"timeline first page / a one-page timeline's, {where}" in text
    assert "sweep / sweep at 24 queued 1 agent" in text
    assert "timeline one-row page / a one-row timeline's, 60 queued, 3 agents" in text


def test_a_crashing_case_is_reported_and_the_others_still_run(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []

    def case(name: str, crash: bool) -> types.ModuleType:
        def run(stdout: Any, options: dict[str, Any]) -> list[Figure]:
            ran.append(name)
            if crash:
                raise RuntimeError(f"{name} went wrong")
            return [Figure("scale", f"{name} ratio", 1.0, "x", "a baseline of the same run")]

        module = types.ModuleType(f"markus.bench.scale_{name}")
        module.run = run  # type: ignore[attr-defined]
        return module

    monkeypatch.setitem(sys.modules, "markus.bench.scale_first", case("first", crash=True))
    monkeypatch.setitem(sys.modules, "markus.bench.scale_second", case("second", crash=False))
    monkeypatch.setattr(scale, "CASES", ["first", "second"])
    out = io.StringIO()
    figures = scale.run(out, {})
    assert ran == ["first", "second"]
    assert [f.name for f in figures] == ["second ratio"]
    assert "scale case first: FAILED" in out.getvalue() and "first went wrong" in out.getvalue()


def test_cases_can_be_chosen_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scale, "CASES", ["queue", "waits"])
    assert scale.selected("waits") == ["waits"]
    assert scale.selected("") == ["queue", "waits"]
    with pytest.raises(ValueError, match="unknown case"):
        scale.selected("nope")
