"""Scale run: ``manage.py bench scale``. The costs that must not grow with the data,
each measured at several sizes and printed beside its baseline from the same run.

The run is a list of cases, ``CASES``: each is a module ``markus.bench.scale_<case>``
with ``run(stdout, options) -> list[Figure]`` (the same contract as a suite), run in
this order in one process. A case that raises is reported with its traceback and the
others still run; the figures of all are returned for the table. ``MARKUS_BENCH_SCALE`` (a
comma-separated subset of the cases' names) runs some of them only; ``--n`` caps the
largest size of a case that has sizes.

Cases:
- ``queue``: 1k / 10k / 100k queued items over 1 / 10 / 100 agents: the loop's time
  per item beside a bare claim + complete, the queue read beside the bare head
  SELECT, the sweep beside the same sweep at the smallest size, the timeline's first
  page beside a one-row page (``markus.bench.scale_queue``).
- ``floor`` (SQLite): the statements of the loop's items replayed with no Python around
  them, on a copy of the database, beside bare claim + complete pairs on the same copy:
  the best ratio the loop could reach with the statements it runs
  (``markus.bench.scale_floor``).
- ``waits``: 512 parked inbox waits: the server's CPU share and SQL statements a second
  beside an idle server, memory per parked MCP wait beside a REST one, a woken REST and
  MCP wait beside a BRPOP wake-up, a call that does not wait beside a one-row GET
  (``markus.bench.scale_waits``).
"""

from __future__ import annotations

import importlib
import os
import time
import traceback
from typing import TYPE_CHECKING, Any

from .report import Figure

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "scale"
# The cases, in order: module markus.bench.scale_<name>, run(stdout, options) -> figures.
CASES: list[str] = ["queue", "floor", "waits"]
SELECT_ENV = "MARKUS_BENCH_SCALE"


def selected(raw: str | None = None) -> list[str]:
    """The cases to run: all, or the subset named in ``MARKUS_BENCH_SCALE``."""
    raw = os.environ.get(SELECT_ENV, "") if raw is None else raw
    wanted = [name.strip() for name in raw.split(",") if name.strip()]
    if not wanted:
        return list(CASES)
    unknown = [name for name in wanted if name not in CASES]
    if unknown:
        raise ValueError(f"{SELECT_ENV}: unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    return [name for name in CASES if name in wanted]


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    figures: list[Figure] = []
    failed: list[str] = []
    for name in selected():
        stdout.write(f"-- scale case {name} --\n")
        start = time.monotonic()
        try:
            module = importlib.import_module(f"markus.bench.scale_{name}")
            figures += module.run(stdout, options)
        except Exception:  # one broken case must not hide the others
            failed.append(name)
            stdout.write(f"-- scale case {name}: FAILED (traceback below)\n{traceback.format_exc()}")
            continue
        stdout.write(f"-- scale case {name}: done in {time.monotonic() - start:.1f} s\n")
    if failed and not figures:
        raise RuntimeError(f"every scale case failed: {', '.join(failed)}")
    return figures
