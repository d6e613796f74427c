"""``manage.py bench all`` runs every suite and prints one table; ``bench peers`` measures
the mailbox beside the peer queues on PostgreSQL (and says so plainly elsewhere)."""

from __future__ import annotations

import io
import json
import re
import sys
import types
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from mailbox.models import MailboxItem
from markus import bench
from markus.agents.models import Agent
from markus.bench import peers
from markus.bench.report import Figure

pytestmark = pytest.mark.django_db


@pytest.fixture
def fake_suites(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Three suites in place of the real ones: ``fake_crash`` raises between the others."""
    ran: list[str] = []

    def suite(name: str, value: float, crash: bool = False) -> types.ModuleType:
        def run(stdout: Any, options: dict[str, Any]) -> list[Figure]:
            ran.append(name)
            stdout.write(f"{name} detail line")
            if crash:
                raise RuntimeError(f"{name} went wrong")
            return [Figure(name, "ratio", value, "x", f"{name} bare 100/s", goal=0.9)]

        module = types.ModuleType(f"markus.bench.{name}")
        module.run = run  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, f"markus.bench.{name}", module)
        return module

    suite("fake_fast", 1.25)
    suite("fake_crash", 0, crash=True)
    suite("fake_slow", 0.5)
    monkeypatch.setattr(bench, "SUITES", ["fake_fast", "fake_crash", "fake_slow"])
    monkeypatch.setattr(bench, "POSTGRESQL_ONLY", [])
    return ran


def _table_row(text: str, suite: str) -> str:
    rows = [line for line in text.splitlines() if re.match(rf"{suite}\s\s+", line)]
    assert len(rows) == 1, f"no single table row for {suite} in:\n{text}"
    return rows[0]


def test_bench_all_only_runs_the_subset_and_prints_one_table(fake_suites: list[str]) -> None:
    out = io.StringIO()
    call_command("bench", "all", "--only", "fake_slow,fake_fast", stdout=out)
    text = out.getvalue()
    assert fake_suites == ["fake_fast", "fake_slow"]  # the suites' order, not the option's
    assert "fake_fast detail line" in text and "fake_slow detail line" in text
    assert "environment: database " in text
    fast, slow = _table_row(text, "fake_fast"), _table_row(text, "fake_slow")
    assert "1.25 x" in fast and ">= 0.900 x" in fast and "ok" in fast and "fake_fast bare 100/s" in fast
    assert "0.500 x" in slow and "MISSES" in slow  # a missed goal is printed, not an error
    assert "2 figures, 1 meet their goal, 1 miss it" in text


def test_a_crashing_suite_is_reported_failed_and_the_others_still_run(fake_suites: list[str]) -> None:
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match="1 suite\\(s\\) crashed: fake_crash"):
        call_command("bench", "all", stdout=out, stderr=err)
    text = out.getvalue()
    assert fake_suites == ["fake_fast", "fake_crash", "fake_slow"]
    assert "FAILED" in _table_row(text, "fake_crash") and "RuntimeError: fake_crash went wrong" in text
    assert "0.500 x" in _table_row(text, "fake_slow")
    assert "Traceback" in err.getvalue()


def test_bench_all_json_writes_every_figure_and_the_failures(fake_suites: list[str], tmp_path: Any) -> None:
    path = tmp_path / "figures.json"
    with pytest.raises(CommandError):
        call_command("bench", "all", "--json", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    doc = json.loads(path.read_text())
    assert doc["environment"]["database"].startswith(connection.vendor)
    assert [(f["suite"], f["value"], f["goal"], f["meets_goal"]) for f in doc["figures"]] == [
        ("fake_fast", 1.25, 0.9, True),
        ("fake_slow", 0.5, 0.9, False),
    ]
    assert doc["failed"] == {"fake_crash": "RuntimeError: fake_crash went wrong"}


def test_bench_all_refuses_an_unknown_suite_in_only(fake_suites: list[str]) -> None:
    with pytest.raises(CommandError, match="unknown suite\\(s\\) nonsense"):
        call_command("bench", "all", "--only", "fake_fast,nonsense", stdout=io.StringIO())
    assert fake_suites == []


def test_bench_one_suite_prints_its_table(fake_suites: list[str]) -> None:
    out = io.StringIO()
    call_command("bench", "fake_fast", stdout=out)
    assert "1.25 x" in _table_row(out.getvalue(), "fake_fast")


def test_the_real_suite_list_is_the_issue_order() -> None:
    assert bench.SUITES == [
        "mailbox",
        "attention",
        "wakeup",
        "agentbus",
        "timeline",
        "websocket",
        "memory",
        "prompts",
        "scale",
        "asgi",
        "walk",
    ]
    assert bench.POSTGRESQL_ONLY == ["peers"]


def test_bench_peers_on_sqlite_is_a_clear_error() -> None:
    # Unmarked, so it runs in the SQLite pass, the one whose database peers refuses.
    assert connection.vendor == "sqlite"
    with pytest.raises(CommandError, match="needs PostgreSQL; the configured database is sqlite"):
        call_command("bench", "peers", "--n", "10", stdout=io.StringIO())


@pytest.mark.postgres
def test_bench_peers_measures_the_mailbox_and_skips_peers_not_installed(
    monkeypatch: pytest.MonkeyPatch, agent: Agent
) -> None:
    # Whatever this venv happens to hold, the test sees no peer: tests never install them.
    monkeypatch.setattr(peers, "locate", lambda peer: "")
    out = io.StringIO()
    call_command("bench", "peers", "--n", "50", stdout=out)
    text = out.getvalue()
    assert "N=50 jobs per system" in text
    assert "Markus mailbox" in text
    for peer in ("pgqueuer", "procrastinate", "oban"):
        assert f"{peer}" in text and "skipped: not installed (run bench peers --install)" in text
    mailbox_rows = [line for line in text.splitlines() if line.startswith("peers  mailbox: ")]
    assert len(mailbox_rows) == 2
    assert ">= 0.900 x" in mailbox_rows[0] and "bare INSERT" in mailbox_rows[0]
    assert ">= 0.750 x" in mailbox_rows[1] and "bare SKIP LOCKED claim" in mailbox_rows[1]
    # The throwaway agent, its items and the scratch schemas are gone.
    assert list(Agent.objects.values_list("id", flat=True)) == [agent.id]
    assert not MailboxItem.objects.exists()
    with connection.cursor() as cursor:
        cursor.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'markus_bench_%%'")
        assert cursor.fetchall() == []


def test_a_suite_still_on_the_old_interface_runs_without_figures(
    fake_suites: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    legacy = types.ModuleType("markus.bench.fake_legacy")
    legacy.run = lambda stdout, options: {"rate": 1.0}  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "markus.bench.fake_legacy", legacy)
    monkeypatch.setattr(bench, "SUITES", ["fake_legacy", "fake_fast"])
    out = io.StringIO()
    call_command("bench", "all", stdout=out)
    assert "(fake_legacy returned no figures for the table)" in out.getvalue()
    assert "1.25 x" in _table_row(out.getvalue(), "fake_fast")


def test_peer_rounds_and_errors_read_in_one_line() -> None:
    from markus.bench import peers_async

    assert peers_async.rounds(2000) == [334, 334, 333, 333, 333, 333]
    assert peers_async.rounds(7) == [7]
    try:
        try:
            raise ValueError('relation "x" does not exist\nLINE 1: SELECT\n       ^')
        except ValueError as cause:
            raise RuntimeError("\n    Database error.\n") from cause
    except RuntimeError as exc:
        assert (
            peers_async.describe(exc) == 'RuntimeError: Database error. (from ValueError: relation "x" does not exist)'
        )
    stderr = 'Traceback (most recent call last):\n  File "x"\npsycopg.errors.UndefinedTable: no\nLINE 1: UPDATE\n   ^\n'
    assert peers._last_error(stderr, 1) == "psycopg.errors.UndefinedTable: no"


@pytest.mark.postgres
def test_bench_peers_measures_an_installed_peer_beside_the_async_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in peer (bare SQL in a schema of its own) goes through the whole async path:
    its own event loop and connection, interleaved rounds with the baseline, its schema
    dropped afterwards, an informative figure (no goal) per ratio."""
    from contextlib import asynccontextmanager

    from markus.bench import peers_async

    @asynccontextmanager
    async def fakepeer(dsn: str) -> Any:
        async with peers_async.in_schema(dsn, "fakepeer") as schema:
            conn = await peers_async._connect(dsn, schema)
            async with conn:
                await conn.execute(peers_async.BARE_TABLE)

                async def enqueue(i: int) -> None:
                    await conn.execute(peers_async.BARE_INSERT, ("bench", 0, json.dumps({"i": i})))

                async def claim_ack() -> bool:
                    row = await (await conn.execute(peers_async.BARE_CLAIM, ("bench",))).fetchone()
                    if row is not None:
                        await conn.execute(peers_async.BARE_ACK, (row[0],))
                    return row is not None

                yield peers_async.AsyncOps(enqueue, claim_ack)

    monkeypatch.setattr(peers_async, "PEERS", {"fakepeer": fakepeer})
    monkeypatch.setattr(peers, "PINS", {"fakepeer": "fakepeer==1.0"})
    monkeypatch.setattr(peers, "CALLS", {"fakepeer": "INSERT; UPDATE + UPDATE"})
    monkeypatch.setattr(peers, "locate", lambda peer: "here")
    monkeypatch.setattr(peers_async, "version", lambda peer: "1.0")
    out = io.StringIO()
    call_command("bench", "peers", "--n", "40", stdout=out)
    text = out.getvalue()
    assert re.search(r"fakepeer 1\.0\s+async psycopg\s+\d+\s+\d+\s+\d+\.\d\d", text), text
    rows = [line for line in text.splitlines() if line.startswith("peers  fakepeer 1.0: ")]
    assert len(rows) == 2 and all("on async psycopg" in row and ">=" not in row for row in rows)
    with connection.cursor() as cursor:
        cursor.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'markus_bench_%%'")
        assert cursor.fetchall() == []
