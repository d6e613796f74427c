"""Calls made while a stdio tool server starts or restarts (issue 35, point 5): every
concurrent caller waits until the connection is ready (bounded by the server's timeout)
or is answered ``ServerDown`` saying why; none gets a connection that is not ready yet
(it failed with a bare ``AssertionError``). The server is counter_server.py over stdio,
started by the runtime; the calls are made from threads released together."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from markus.toolservers.runtime import ServerDown, Spec, runtime

from .conftest import HERE

CALLERS = 8
# Seconds before each forget(): while the server starts, then while calls run on it.
FORGET_AFTER = (0.3, 1.5)


# Python that sleeps, then becomes the command after it: a server slow to start.
LATE = (sys.executable, "-c", "import os, sys, time; time.sleep(30); os.execv(sys.argv[1], sys.argv[1:])")


def counter_spec(log: Path, *, timeout: float = 20.0, command: tuple[str, ...] = ()) -> Spec:
    """counter_server.py over stdio (``command`` goes before it, to delay its start)."""
    argv = (*command, sys.executable, str(HERE / "counter_server.py"), "--log", str(log))
    return Spec(name="counter", transport="stdio", command=argv[0], args=argv[1:], timeout=timeout)


def at_once(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """``fn(i)`` in ``n`` threads released together: each one's result or exception."""
    barrier = threading.Barrier(n)
    outcomes: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = fn(i)
        except Exception as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return outcomes


def use(spec: Spec, i: int) -> Any:
    """A call or, every other caller, a listing."""
    if i % 2:
        return [t["name"] for t in runtime().list_tools(spec)]
    return runtime().call_tool(spec, "count", {"marker": "m"})["content"][0]["text"]


def servers_running(log: Path) -> int:
    """counter_server.py processes of this test (by their log file) still running."""
    running = 0
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        running += str(log).encode() in argv
    return running


def failures(outcomes: list[Any]) -> list[Any]:
    return [o for o in outcomes if isinstance(o, Exception)]


def test_calls_made_while_a_stdio_server_starts_wait_until_it_is_ready(tmp_path, stop_servers):
    spec = counter_spec(tmp_path / "effects.log")

    outcomes = at_once(CALLERS, lambda i: use(spec, i))

    assert failures(outcomes) == []
    assert outcomes[0] == "0" and "increment" in outcomes[1]
    assert runtime().connected() == ["counter"]
    assert servers_running(tmp_path / "effects.log") == 1


def test_calls_made_while_an_edited_server_restarts_wait_for_the_new_one(tmp_path, stop_servers):
    log = tmp_path / "effects.log"
    assert use(counter_spec(log), 0) == "0"
    edited = counter_spec(log, timeout=25.0)

    outcomes = at_once(CALLERS, lambda i: use(edited, i))

    assert failures(outcomes) == []
    assert servers_running(log) == 1


def test_calls_made_while_the_server_is_forgotten_get_an_answer_or_server_down(tmp_path, stop_servers):
    """The operator edits or deletes the server while calls run (and while it starts): a
    call either gets its answer or ServerDown, and the next call starts it afresh."""
    log = tmp_path / "effects.log"
    spec = counter_spec(log)
    forgotten = threading.Event()

    def call_or_forget(i: int) -> list[Any]:
        if i == 0:
            for pause in FORGET_AFTER:
                time.sleep(pause)
                runtime().forget(spec.name)
            forgotten.set()
            return []
        outcomes: list[Any] = []
        while not forgotten.is_set():
            try:
                outcomes.append(use(spec, i))
            except Exception as exc:
                outcomes.append(exc)
        return outcomes

    outcomes = [o for each in at_once(CALLERS, call_or_forget) for o in each]

    assert [f for f in failures(outcomes) if not isinstance(f, ServerDown)] == []
    assert use(spec, 0) == "0"
    assert servers_running(log) == 1


def test_calls_to_a_server_that_starts_too_slowly_are_told_it_is_starting(tmp_path, stop_servers):
    spec = counter_spec(tmp_path / "effects.log", timeout=0.5, command=LATE)

    outcomes = at_once(CALLERS, lambda i: use(spec, i))

    assert all(isinstance(o, ServerDown) and "starting" in str(o) for o in outcomes), outcomes
    assert runtime().connected() == []
