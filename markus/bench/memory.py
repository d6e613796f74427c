"""Memory per idle agent: what an agent that runs and has nothing to do costs a process.

Two figures, each against the same process before the agents existed:

1. In a worker, between sweeps. After a warm-up round (as many agents, created, swept
   and deleted: the one-off costs are paid before the baseline), N (1,000) agents are
   created running and idle (internal, no mailbox items, no lease), then the beat's sweep
   (``attention.services.sweep``, every ``SWEEP_SECONDS``) runs over them a few times.
   What the process still holds afterwards, divided by N, is the cost of an idle agent
   in a worker: it should be nothing (the sweep asks the database which agents have due
   work; an idle agent is not loaded at all). The sweep's transient peak is printed too.
2. Watched: M (100) of those agents each with one open mind view
   (``/ws/agents/<id>/mind/``, the consumer the page opens), connected in-process through
   Channels' communicator to the real ASGI application and channel layer: the consumer,
   its scope, its ``MindStream``, its channel-layer queue and group entry (and the
   communicator's two small queues), per agent. No goal: informative.

Memory is Python's own (tracemalloc, current traced bytes after a full collection);
the resident set size (RSS) delta is printed beside it and is coarse (the allocator keeps
freed arenas). The agents and their rows are deleted at the end, whatever happened.
"""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
from typing import TYPE_CHECKING, Any

from markus.bench.report import Figure

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "memory"
DEFAULT_N = 1000
WATCHED = 100
SWEEPS = 3
GOAL_IDLE_BYTES = 64.0  # "nothing": below one small object per agent


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _settled() -> tuple[int, int]:
    """(traced bytes, RSS) after a full collection."""
    gc.collect()
    return tracemalloc.get_traced_memory()[0], _rss_bytes()


def _agent_id(tag: str, i: int | str) -> str:
    return f"bench-idle-{tag}-{i}"


def _create_idle_agents(tag: str, n: int, owner: Any) -> None:
    """N running idle agents with their main sessions. Nothing of them is kept here: the
    bench finds them again by their id prefix."""
    from markus.agents.models import Agent, ChatSession

    Agent.objects.bulk_create(
        (Agent(id=_agent_id(tag, i), name=f"idle {i}", kind=Agent.Kind.INTERNAL, owner=owner) for i in range(n)),
        batch_size=500,
    )
    ChatSession.objects.bulk_create(
        (ChatSession(agent_id=_agent_id(tag, i), is_main=True, title="Main session") for i in range(n)),
        batch_size=500,
    )


async def _watch(paths: list[str], cookie: bytes) -> tuple[tuple[int, int], tuple[int, int]]:
    """Open one mind view per path; returns ((traced, RSS) before, (traced, RSS) open)."""
    from channels.testing import WebsocketCommunicator

    from markus.asgi import application

    async def open_view(path: str) -> WebsocketCommunicator:
        communicator = WebsocketCommunicator(application, path, headers=[(b"cookie", cookie)])
        connected, _ = await communicator.connect(timeout=20)
        if not connected:
            raise RuntimeError(f"mind view refused: {path}")
        await communicator.receive_from(timeout=20)  # the first render: header and page
        return communicator

    warm = await open_view(paths[0])  # one-off costs (imports, templates, the layer) are no agent's
    await warm.disconnect()
    before = _settled()
    views = [await open_view(path) for path in paths]
    after = _settled()
    for view in views:
        await view.disconnect()
    return before, after


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    import uuid

    from asgiref.sync import async_to_sync
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from attention.services import sweep
    from markus.agents.models import Agent

    n = min(options.get("n") or DEFAULT_N, 10 * DEFAULT_N)
    m = min(WATCHED, n)
    tag, warm_tag = uuid.uuid4().hex[:8], uuid.uuid4().hex[:8]
    owner = User.objects.create_user(f"bench-idle-{tag}")
    started_tracing = not tracemalloc.is_tracing()
    try:
        if started_tracing:
            tracemalloc.start()
        # A warm-up round with as many agents, deleted again: the one-off costs (imports,
        # compiled queries, the driver's statement cache, the time zone cache) are paid
        # before the baseline, so what remains is what the agents themselves cost.
        _create_idle_agents(warm_tag, n, owner)
        for _ in range(2):
            sweep()
        Agent.objects.filter(id__startswith=_agent_id(warm_tag, "")).delete()
        before, rss_before = _settled()
        t0 = time.monotonic()
        _create_idle_agents(tag, n, owner)
        created_in = time.monotonic() - t0
        for _ in range(SWEEPS - 1):
            sweep()
        gc.collect()
        tracemalloc.reset_peak()
        t0 = time.monotonic()
        kicked = sweep()
        sweep_ms = (time.monotonic() - t0) * 1000
        peak = tracemalloc.get_traced_memory()[1]
        after, rss_after = _settled()
        if kicked:
            raise RuntimeError(f"the sweep kicked {kicked} agent(s): the bench agents are not idle")
        idle = (after - before) / n
        transient = (peak - after) / n

        client = Client()
        client.force_login(owner)
        cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
        (w_before, w_rss_before), (w_after, w_rss_after) = async_to_sync(_watch)(
            [f"/ws/agents/{_agent_id(tag, i)}/mind/" for i in range(m)], cookie
        )
        watched = (w_after - w_before) / m
    finally:
        if started_tracing and tracemalloc.is_tracing():
            tracemalloc.stop()
        for prefix in (tag, warm_tag):
            Agent.objects.filter(id__startswith=_agent_id(prefix, "")).delete()
        owner.delete()

    stdout.write(
        f"memory bench on {connection.vendor}: {n} idle agents (created in {created_in:.1f} s),"
        f" {SWEEPS} sweeps, the last {sweep_ms:.0f} ms\n"
        f"idle agent in a worker, after the sweeps: {idle:.1f} B traced per agent"
        f" (RSS {(rss_after - rss_before) / n:.0f} B per agent);"
        f" the sweep's transient peak {transient:.0f} B per agent\n"
        f"watched idle agent, one mind view each ({m}): {watched:.0f} B traced per agent"
        f" (RSS {(w_rss_after - w_rss_before) / m:.0f} B per agent)\n"
    )
    baseline = f"the same process before the {n} agents (RSS {rss_before / 1e6:.0f} MB)"
    return [
        Figure(SUITE, "idle agent in a worker between sweeps", idle, "B", baseline, GOAL_IDLE_BYTES, "lower"),
        Figure(
            SUITE,
            "watched idle agent (one mind view)",
            watched,
            "B",
            f"the same process before the {m} views (RSS {w_rss_before / 1e6:.0f} MB)",
            None,
            "lower",
        ),
    ]
