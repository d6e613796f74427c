"""AgentBus benchmark: the wake-up latency of ``wait``, from the commit of an append to
the answer, and in the same run a bare Redis BRPOP round trip on the same machine;
prints median, p99 and the ratio wait / BRPOP. Then the memory of an idle waiter.

Steps:
1. Create two throwaway external agents (a writer and a watcher: no mailbox, no loop).
2. ``wait``: an event loop in a thread awaits ``inbox_wait`` (the coroutine the async
   inbox view awaits). Once it sleeps, the main thread appends one chunk and stamps
   the commit from an on-commit callback registered before the append's own
   wake-up; latency = the coroutine's return - that stamp. Measured with the
   configured channel layer and, when that is the in-memory one, with the Redis
   pub/sub layer too.
3. BRPOP: a thread blocks in BRPOP; the main thread stamps and LPUSHes; latency =
   BRPOP's return - the stamp. Its rounds alternate with the waits' (one each), so a
   machine shared with other work weighs on both alike.
4. Memory per idle waiter: M (1,000) ``inbox_wait`` coroutines parked at once in one
   event loop, on the watcher's inbox; the growth of the process's resident set, then
   (a second round) of tracemalloc's traced memory, divided by M; one append then
   wakes them all and each must answer with it. Goal: 10 KB per waiter, what a
   coroutine, its future and a registry entry should cost (a thread would cost its
   stack, a connection its buffers: tens of KB each), so 10,000 idle watchers fit in
   100 MB.
5. Delete the agents and their rows, whatever happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import resource
import statistics
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from unittest import mock

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.db import transaction
from django.test.utils import override_settings

from agentbus import services
from agentbus.cursors import encode_cursor
from agentbus.models import AuditEvent, ConsumerCursor
from agentbus.selectors import current_clock
from agentbus.waiting import inbox_wait
from agentbus.wakeup import InboxWaiter
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.waits import WAITS

from .report import Figure

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

_T = TypeVar("_T")

SUITE = "agentbus"
DEFAULT_N = 200
WARMUP = 10
PAUSE = 0.002  # between the waiter going to sleep and the append
GOAL_RATIO = 2.0  # wake-up / BRPOP, at the median and at p99
IDLE_WAITERS = 1000
GOAL_KB_PER_WAITER = 10.0


def _stats(samples: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in samples)
    p99 = statistics.quantiles(ms, n=100)[98] if len(ms) >= 2 else ms[0]
    return statistics.median(ms), p99


def _stamp(into: list[float]) -> None:
    into.append(time.perf_counter())


async def _cancel_the_rest() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class _Loop:
    """An event loop in a thread, like the one a daphne worker serves from."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, _T]) -> Future[_T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.submit(_cancel_the_rest()).result(5)  # e.g. the loop's wake-up subscriber
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


Waiter = Callable[[str], Coroutine[Any, Any, dict[str, Any]]]


def measure_wait(
    n: int, writer: Agent, watcher: Agent, between: Callable[[int], None], *, waiter: Waiter | None = None
) -> list[float]:
    """``n`` wake-ups (after WARMUP); ``between(i)`` runs before each round (the
    baseline's round: both see the machine in the same state). ``waiter``: how a wait
    is made (default: the coroutine the REST view awaits)."""
    stream = services.stream_open(sender=writer, recipient=watcher)
    sleeping = threading.Event()
    real_wait = InboxWaiter.wait

    async def wait_and_flag(self: InboxWaiter, timeout: float, **kwargs: Any) -> Any:
        sleeping.set()
        return await real_wait(self, timeout, **kwargs)

    async def rest_wait(cursor: str) -> dict[str, Any]:
        return await inbox_wait(agent_id=watcher.id, after_cursor=cursor, timeout=10)

    async def timed_wait(cursor: str) -> tuple[dict[str, Any], float]:
        result = await (waiter or rest_wait)(cursor)
        return result, time.perf_counter()

    samples: list[float] = []
    runner = _Loop()
    cursor = encode_cursor(watcher.id, current_clock())  # start after earlier rounds
    try:
        with mock.patch.object(InboxWaiter, "wait", wait_and_flag):
            for i in range(n + WARMUP):
                between(i)
                sleeping.clear()
                future = runner.submit(timed_wait(cursor))
                while not sleeping.wait(0.05):
                    if future.done():  # it answered or failed before sleeping
                        future.result()
                        raise RuntimeError("the waiter answered before anything was appended")
                time.sleep(PAUSE)
                stamp: list[float] = []
                with transaction.atomic():
                    transaction.on_commit(partial(_stamp, stamp))
                    services.stream_append(stream_id=stream.id, sender=writer, payload={"n": i})
                result, answered = future.result(15)
                if result["timed_out"]:
                    raise RuntimeError("wait timed out: no wake-up arrived")
                cursor = result["next_cursor"]
                if i >= WARMUP:
                    samples.append(answered - stamp[0])
    finally:
        runner.stop()
    return samples


class McpSession:
    """An MCP client of the MCP door (``agentbus.mcp_door``) as the watcher, in the
    runner's loop: the SDK's own client and server, dispatched in process (no HTTP: what
    is measured is the door's tool and the SDK around it)."""

    def __init__(self, runner: _Loop, watcher: Agent) -> None:
        from django.contrib.auth.models import AnonymousUser

        from agentbus.mcp_door import build
        from markus.agents.auth import Caller

        caller = Caller(AnonymousUser(), watcher)

        async def identify(ctx: object) -> Caller:
            return caller

        self.server = build(identify)
        self.runner = runner
        self.opened: Future[None] = Future()
        self.held = runner.submit(self._hold())
        self.opened.result(30)

    async def _hold(self) -> None:
        from mcp import Client

        self.closing = asyncio.Event()
        try:
            async with Client(self.server) as client:
                self.client = client
                self.opened.set_result(None)
                await self.closing.wait()
        except BaseException as exc:
            if not self.opened.done():
                self.opened.set_exception(exc)
            raise

    async def wait(self, cursor: str, timeout: float = 10) -> dict[str, Any]:
        result = await self.client.call_tool("inbox_wait", {"timeout_seconds": timeout, "after_cursor": cursor})
        if result.is_error or not isinstance(result.structured_content, dict):
            raise RuntimeError(f"inbox_wait failed: {result.content}")
        return result.structured_content

    def close(self) -> None:
        self.runner.loop.call_soon_threadsafe(self.closing.set)
        self.held.result(10)


class Brpop:
    """The baseline, one round at a time: a thread blocks in BRPOP, this one stamps and
    LPUSHes; a sample is BRPOP's return - the stamp."""

    def __init__(self, url: str) -> None:
        import redis

        self.key = f"markus:bench:brpop:{uuid.uuid4().hex}"
        self.pusher, self.popper = redis.Redis.from_url(url), redis.Redis.from_url(url)
        self.samples: list[float] = []

    def _pop_and_stamp(self, got: list[float]) -> None:
        self.popper.brpop([self.key], timeout=10)
        _stamp(got)

    def sample(self, i: int) -> None:
        got: list[float] = []
        thread = threading.Thread(target=self._pop_and_stamp, args=(got,))
        thread.start()
        time.sleep(PAUSE)
        sent = time.perf_counter()
        self.pusher.lpush(self.key, str(i))
        thread.join(15)
        if not got:
            raise RuntimeError("BRPOP did not return")
        if i >= WARMUP:
            self.samples.append(got[0] - sent)

    def close(self) -> None:
        self.pusher.delete(self.key)
        self.pusher.close()
        self.popper.close()


def _layer_name() -> str:
    layer = get_channel_layer()
    if type(layer) is InMemoryChannelLayer:
        return "InMemoryChannelLayer (process-local wake registry)"
    return type(layer).__name__


def _redis_layers(url: str) -> dict[str, dict[str, Any]]:
    return {"default": {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer", "CONFIG": {"hosts": [url]}}}


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except OSError:  # not Linux: the peak is the best there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure_idle(m: int, writer: Agent, watcher: Agent, *, traced: bool, mcp: bool = False) -> tuple[float, int]:
    """Park ``m`` waits in one loop (``mcp``: as ``inbox_wait`` calls of one MCP client,
    the per-caller cap of waits lifted); answers (bytes per waiter, waiters woken by one
    append)."""
    stream = services.stream_open(sender=writer, recipient=watcher)
    parked = 0
    all_parked = threading.Event()
    real_wait = InboxWaiter.wait

    async def wait_and_count(self: InboxWaiter, timeout: float, **kwargs: Any) -> Any:
        nonlocal parked
        parked += 1
        if parked == m:
            all_parked.set()
        return await real_wait(self, timeout, **kwargs)

    runner = _Loop()
    session = McpSession(runner, watcher) if mcp else None

    async def park_all(cursor: str) -> list[dict[str, Any]]:
        if session is not None:
            return await asyncio.gather(*(session.wait(cursor, 120) for _ in range(m)))
        waits = [inbox_wait(agent_id=watcher.id, after_cursor=cursor, timeout=120) for _ in range(m)]
        return await asyncio.gather(*waits)

    uncapped = mock.patch.object(WAITS, "claim", lambda *waiter, **chat: contextlib.nullcontext()) if mcp else None
    try:
        if uncapped is not None:
            uncapped.start()
        cursor = encode_cursor(watcher.id, current_clock())
        warm = runner.submit(inbox_wait(agent_id=watcher.id, after_cursor=cursor, timeout=0))
        warm.result(30)  # the first wait's one-off costs (imports, thread, connection) are not a waiter's
        gc.collect()
        if traced:
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
        else:
            before = _rss_bytes()
        with mock.patch.object(InboxWaiter, "wait", wait_and_count):
            future = runner.submit(park_all(cursor))
            if not all_parked.wait(120):
                raise RuntimeError(f"only {parked} of {m} waits parked")
            time.sleep(0.2)
            gc.collect()
            after = tracemalloc.get_traced_memory()[0] if traced else _rss_bytes()
            if traced:
                tracemalloc.stop()
            services.stream_append(stream_id=stream.id, sender=writer, payload={"wake": "all"})
            results = future.result(60)
    finally:
        if tracemalloc.is_tracing():
            tracemalloc.stop()
        if uncapped is not None:
            uncapped.stop()
        if session is not None:
            session.close()
        runner.stop()
    woken = sum(1 for r in results if not r["timed_out"] and len(r["messages"]) == 1)
    return (after - before) / m, woken


def _ratio_figures(
    what: str, short: str, name: str, measured: tuple[float, float], brpop: tuple[float, float]
) -> list[Figure]:
    """A wake-up's p50 and p99 as ratios to BRPOP's of the same rounds."""
    return [
        Figure(
            suite=SUITE,
            name=f"{what} {label} / BRPOP {label} ({name})",
            value=value / base,
            unit="x",
            baseline=f"BRPOP {label} {base:.3f} ms; {short} {label} {value:.3f} ms",
            goal=GOAL_RATIO,
            better="lower",
        )
        for label, value, base in (("p50", measured[0], brpop[0]), ("p99", measured[1], brpop[1]))
    ]


def _memory_figure(name: str, per_waiter_bytes: float, baseline: str) -> Figure:
    return Figure(
        suite=SUITE,
        name=name,
        value=per_waiter_bytes / 1024,
        unit="KB",
        baseline=baseline,
        goal=GOAL_KB_PER_WAITER,
        better="lower",
    )


def _layer_figures(
    n: int, writer: Agent, watcher: Agent, url: str, m: int, rss: bool, write: Callable[[str], None]
) -> list[Figure]:
    name = _layer_name()
    baseline = Brpop(url)
    try:
        median, p99 = _stats(measure_wait(n, writer, watcher, between=baseline.sample))
    finally:
        baseline.close()
    brpop = _stats(baseline.samples)
    write(
        f"  Redis BRPOP round trip ({url}, rounds alternating with the waits'): "
        f"median {brpop[0]:.3f} ms, p99 {brpop[1]:.3f} ms"
    )
    write(f"  wait wake-up, append commit -> answer, {name}: median {median:.3f} ms, p99 {p99:.3f} ms")
    write(f"    ratio wait / BRPOP: median {median / brpop[0]:.1f}x, p99 {p99 / brpop[1]:.1f}x")
    figures = _ratio_figures("wait wake-up", "wait", name, (median, p99), brpop)
    figures += _mcp_figures(n, writer, watcher, url, m, name, write)
    # RSS only in the first round: later ones reuse the memory earlier ones freed.
    rss_each, woken = measure_idle(m, writer, watcher, traced=False) if rss else (float("nan"), m)
    traced, woken_too = measure_idle(m, writer, watcher, traced=True)
    rss_text = f"RSS +{rss_each / 1024:.1f} KB each" if rss else "RSS not measured (heap reused)"
    write(
        f"  {m} idle waiters in one event loop, {name}: {traced / 1024:.1f} KB each traced, "
        f"{rss_text}; one append woke {woken} and {woken_too} of {m}"
    )
    figures.append(
        _memory_figure(
            f"memory per idle waiter, tracemalloc ({m} parked, {name})",
            traced,
            f"{rss_text}; {woken_too} of {m} woken by one append",
        )
    )
    return figures


def _mcp_figures(
    n: int, writer: Agent, watcher: Agent, url: str, m: int, name: str, write: Callable[[str], None]
) -> list[Figure]:
    """The MCP door's ``inbox_wait``: its wake-up against BRPOP in the same rounds, and
    the memory of a parked MCP wait."""
    baseline = Brpop(url)
    runner = _Loop()
    session = McpSession(runner, watcher)
    try:
        median, p99 = _stats(measure_wait(n, writer, watcher, between=baseline.sample, waiter=session.wait))
    finally:
        session.close()
        runner.stop()
        baseline.close()
    brpop = _stats(baseline.samples)
    write(
        f"  MCP inbox_wait wake-up (the SDK's client, in process), {name}: median {median:.3f} ms, "
        f"p99 {p99:.3f} ms; BRPOP in the same rounds median {brpop[0]:.3f} ms: "
        f"{median / brpop[0]:.1f}x, p99 {p99 / brpop[1]:.1f}x"
    )
    figures = _ratio_figures("MCP inbox_wait wake-up", "MCP wait", name, (median, p99), brpop)
    traced, woken = measure_idle(m, writer, watcher, traced=True, mcp=True)
    write(f"  {m} parked MCP inbox_wait calls, {name}: {traced / 1024:.1f} KB each traced; one append woke {woken}")
    figures.append(
        _memory_figure(
            f"memory per parked MCP inbox_wait, tracemalloc ({m} parked, {name})",
            traced,
            f"{woken} of {m} woken by one append; no thread per wait",
        )
    )
    return figures


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    n = options.get("n") or DEFAULT_N
    url = getattr(settings, "REDIS_URL", "") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    tag = uuid.uuid4().hex[:8]
    writer = agent_create(name="bench writer", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-bus-{tag}-w")[0]
    watcher = agent_create(name="bench watcher", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-bus-{tag}-r")[0]
    Agent.objects.filter(id__in=[writer.id, watcher.id]).update(status=Agent.RunStatus.STOPPED)

    def write(line: str) -> None:
        stdout.write(line + "\n")

    figures: list[Figure] = []
    try:
        engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        write(f"agentbus bench: n={n} (after {WARMUP} warm-up rounds), database {engine}")
        layers: list[contextlib.AbstractContextManager[Any]] = [contextlib.nullcontext()]
        if isinstance(get_channel_layer(), InMemoryChannelLayer):
            layers.append(override_settings(CHANNEL_LAYERS=_redis_layers(url)))
        for layer in layers:
            with layer:
                m = options.get("waiters") or IDLE_WAITERS
                figures += _layer_figures(n, writer, watcher, url, m, layer is layers[0], write)
    finally:
        ids = [writer.id, watcher.id]
        AuditEvent.objects.filter(agent_id__in=ids).delete()
        ConsumerCursor.objects.filter(agent_id__in=ids).delete()
        Agent.objects.filter(id__in=ids).delete()
    return figures
