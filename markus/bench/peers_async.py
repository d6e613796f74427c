"""The asynchronous half of ``bench peers``: the peers (pgqueuer, procrastinate, oban) and
the bare-SQL baseline they are held to, each on its own async psycopg connection in its
own schema, run in an event loop of its own.

This module imports only the standard library and psycopg (each peer is imported inside
its own function), so it also runs as a script under another interpreter: oban needs
Python >= 3.12, and when this venv is older ``bench peers`` runs
``<side python> peers_async.py oban`` and reads one JSON line back (the DSN comes in the
``MARKUS_BENCH_DSN`` environment variable, never on the command line).

Every system runs the same harness beside the bare baseline: both warmed up (WARMUP
jobs each), then N jobs in ROUNDS rounds, the two taking turns to go first; a round is k
enqueues (one producer, one transaction each), then claim + ack until the queue is empty
(one consumer; one transaction for the claim, one for the ack, as each library's worker
does). The bare baseline is INSERT / UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING /
UPDATE on a scratch table. Interleaving keeps the ratio honest on a noisy machine: a
burst of load falls on both sides, not on one.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

WARMUP = 20
ROUNDS = 6  # N is measured in rounds, alternating with the baseline (an even count: each goes first as often)
QUEUE = "bench"
SCHEMA_PREFIX = "markus_bench_"
DSN_ENV = "MARKUS_BENCH_DSN"

# The peers and the versions ``bench peers --install`` pins (checked against the package
# index and the Python each supports; oban needs Python >= 3.12).
PINS = {
    "pgqueuer": "pgqueuer[psycopg]==1.6.0",
    "procrastinate": "procrastinate==3.10.0",
    "oban": "oban==0.7.0",
}
MIN_PYTHON = {"oban": (3, 12)}
CALLS = {
    "pgqueuer": "Queries.enqueue; dequeue + log_jobs",
    "procrastinate": "defer_async; fetch_job + finish_job",
    "oban": "enqueue; fetch_jobs + ack_jobs",
}


@dataclass(frozen=True)
class Rates:
    """Jobs per second of one system: enqueue, then claim + ack."""

    enqueue: float
    claim_ack: float


@dataclass(frozen=True)
class Measured:
    """A system's rates and the bare baseline's, interleaved with it in the same run."""

    system: Rates
    bare: Rates
    version: str
    python: str


@dataclass
class Clock:
    """Seconds spent by one system in each phase, summed over the rounds."""

    enqueue_s: float = 0.0
    claim_ack_s: float = 0.0

    def rates(self, n: int) -> Rates:
        return Rates(enqueue=n / self.enqueue_s, claim_ack=n / self.claim_ack_s)


def _payload(i: int) -> dict[str, str]:
    return {"summary": f"bench item {i}", "content": f"bench content {i}"}


def rounds(n: int) -> list[int]:
    """N split into ROUNDS rounds (fewer when N is small), as even as can be."""
    count = max(1, min(ROUNDS, n // 10))
    return [n // count + (1 if r < n % count else 0) for r in range(count)]


class AsyncOps:
    """One system's two calls: ``enqueue(i)`` and ``claim_ack()`` (False when empty)."""

    def __init__(self, enqueue: Callable[[int], Awaitable[None]], claim_ack: Callable[[], Awaitable[bool]]) -> None:
        self.enqueue, self.claim_ack = enqueue, claim_ack

    async def warm_up(self) -> None:
        for i in range(WARMUP):
            await self.enqueue(i)
        while await self.claim_ack():
            pass

    async def round(self, k: int, clock: Clock) -> None:
        """Enqueue k (one producer), then drain the queue (one consumer), each phase timed."""
        start = time.perf_counter()
        for i in range(k):
            await self.enqueue(i)
        clock.enqueue_s += time.perf_counter() - start
        done = 0
        start = time.perf_counter()
        while await self.claim_ack():
            done += 1
        clock.claim_ack_s += time.perf_counter() - start
        if done != k:
            raise RuntimeError(f"drained {done} jobs, expected {k}")


async def interleave(system: AsyncOps, bare: AsyncOps, n: int) -> tuple[Rates, Rates]:
    """Both warmed up, then round after round, the two taking turns to go first."""
    await system.warm_up()
    await bare.warm_up()
    system_clock, bare_clock = Clock(), Clock()
    for r, k in enumerate(rounds(n)):
        turns = [(system, system_clock), (bare, bare_clock)]
        for ops, clock in turns if r % 2 == 0 else reversed(turns):
            await ops.round(k, clock)
    return system_clock.rates(n), bare_clock.rates(n)


async def _connect(dsn: str, schema: str) -> psycopg.AsyncConnection[Any]:
    return await psycopg.AsyncConnection.connect(dsn, autocommit=True, options=f"-c search_path={schema}")


async def _fresh_schema(dsn: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        await conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


async def _drop_schema(dsn: str, schema: str) -> None:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@asynccontextmanager
async def in_schema(dsn: str, name: str) -> AsyncIterator[str]:
    """A fresh schema ``markus_bench_<name>_<pid>`` for one system, dropped afterwards (the
    pid keeps two benches on one database apart)."""
    schema = f"{SCHEMA_PREFIX}{name}_{os.getpid()}"
    await _fresh_schema(dsn, schema)
    try:
        yield schema
    finally:
        await _drop_schema(dsn, schema)


# -- the bare baseline -----------------------------------------------------------------

BARE_TABLE = """
CREATE TABLE bare_jobs (
    id bigserial PRIMARY KEY,
    queue text NOT NULL,
    priority integer NOT NULL,
    status text NOT NULL DEFAULT 'queued',
    payload jsonb NOT NULL,
    queued_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    completed_at timestamptz,
    attempts integer NOT NULL DEFAULT 0
)
"""
BARE_INDEX = "CREATE INDEX bare_jobs_next ON bare_jobs (queue, priority, queued_at, id) WHERE status = 'queued'"
BARE_INSERT = "INSERT INTO bare_jobs (queue, priority, payload) VALUES (%s, %s, %s) RETURNING id"
BARE_CLAIM = (
    "UPDATE bare_jobs SET status = 'processing', started_at = now(), attempts = attempts + 1"
    " WHERE id = (SELECT id FROM bare_jobs WHERE queue = %s AND status = 'queued'"
    " ORDER BY priority, queued_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, payload"
)
BARE_ACK = "UPDATE bare_jobs SET status = 'completed', completed_at = now() WHERE id = %s"


@asynccontextmanager
async def bare(dsn: str) -> AsyncIterator[AsyncOps]:
    """The baseline on async psycopg: one autocommit connection, a scratch table."""
    async with in_schema(dsn, "bare_async") as schema, await _connect(dsn, schema) as conn:
        await conn.execute(BARE_TABLE)
        await conn.execute(BARE_INDEX)

        async def enqueue(i: int) -> None:
            await (await conn.execute(BARE_INSERT, (QUEUE, i % 5, Jsonb(_payload(i))))).fetchone()

        async def claim_ack() -> bool:
            row = await (await conn.execute(BARE_CLAIM, (QUEUE,))).fetchone()
            if row is None:
                return False
            await conn.execute(BARE_ACK, (row[0],))
            return True

        yield AsyncOps(enqueue, claim_ack)


# -- the peers ---------------------------------------------------------------------------


@asynccontextmanager
async def pgqueuer(dsn: str) -> AsyncIterator[AsyncOps]:
    """pgqueuer on its psycopg driver: ``Queries.enqueue``; ``dequeue`` + ``log_jobs``."""
    queries_module = importlib.import_module("pgqueuer.queries")
    async with in_schema(dsn, "pgqueuer") as schema, await _connect(dsn, schema) as conn:
        queries = queries_module.Queries.from_psycopg_connection(conn)
        await queries.install()
        entrypoints = {QUEUE: queries_module.EntrypointExecutionParameter(concurrency_limit=0)}
        manager_id = uuid.uuid4()
        heartbeat = timedelta(seconds=30)

        async def enqueue(i: int) -> None:
            await queries.enqueue(QUEUE, json.dumps(_payload(i)).encode(), i % 5)

        async def claim_ack() -> bool:
            jobs = await queries.dequeue(
                batch_size=1,
                entrypoints=entrypoints,
                queue_manager_id=manager_id,
                global_concurrency_limit=None,
                heartbeat_timeout=heartbeat,
            )
            if not jobs:
                return False
            await queries.log_jobs([(jobs[0], "successful", None)])
            return True

        yield AsyncOps(enqueue, claim_ack)
        await queries.uninstall()


@asynccontextmanager
async def procrastinate(dsn: str) -> AsyncIterator[AsyncOps]:
    """procrastinate on its psycopg connector: ``defer_async``; ``fetch_job`` + ``finish_job``."""
    module = importlib.import_module("procrastinate")
    jobs_module = importlib.import_module("procrastinate.jobs")
    async with in_schema(dsn, "procrastinate") as schema:
        connector = module.PsycopgConnector(
            conninfo=dsn, kwargs={"options": f"-c search_path={schema}"}, min_size=1, max_size=1
        )
        app = module.App(connector=connector)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

            @app.task(name="bench", queue=QUEUE)
            def bench_task(**kwargs: Any) -> None:  # never run: the bench acks it itself
                pass

            worker_id = await app.job_manager.register_worker()
            succeeded = jobs_module.Status.SUCCEEDED

            async def enqueue(i: int) -> None:
                await bench_task.configure(priority=i % 5).defer_async(**_payload(i))

            async def claim_ack() -> bool:
                job = await app.job_manager.fetch_job(queues=[QUEUE], worker_id=worker_id)
                if job is None:
                    return False
                await app.job_manager.finish_job(job, status=succeeded, delete_job=False)
                return True

            yield AsyncOps(enqueue, claim_ack)
            await app.job_manager.unregister_worker(worker_id)


@asynccontextmanager
async def oban(dsn: str) -> AsyncIterator[AsyncOps]:
    """oban (Python) in client mode on a one-connection pool: ``enqueue``; ``fetch_jobs`` +
    ``ack_jobs`` (the calls its producer makes)."""
    oban_module = importlib.import_module("oban")
    schema_module = importlib.import_module("oban.schema")
    executor = importlib.import_module("oban._executor")
    pool_module = importlib.import_module("psycopg_pool")
    async with in_schema(dsn, "oban") as schema:
        # The search path too: oban's prefix misses some of its objects (oban_count_estimate),
        # which would otherwise land in the public schema.
        pool = pool_module.AsyncConnectionPool(
            dsn, kwargs={"options": f"-c search_path={schema}"}, min_size=1, max_size=1, open=False
        )
        await pool.open()
        try:
            await schema_module.install(pool, prefix=schema)
            client = oban_module.Oban(pool=pool, prefix=schema, node="markus-bench")
            query = client._query
            producer = str(uuid.uuid4())

            async def enqueue(i: int) -> None:
                job = oban_module.Job(worker="bench.Bench", args=_payload(i), queue=QUEUE, priority=i % 5)
                await client.enqueue(job)

            async def claim_ack() -> bool:
                jobs = await query.fetch_jobs(demand=1, queue=QUEUE, node="markus-bench", uuid=producer)
                if not jobs:
                    return False
                await query.ack_jobs([executor.AckAction(job=jobs[0], state="completed")])
                return True

            yield AsyncOps(enqueue, claim_ack)
            await schema_module.uninstall(pool, prefix=schema)
        finally:
            await pool.close()


PEERS: dict[str, Callable[[str], AbstractAsyncContextManager[AsyncOps]]] = {
    "pgqueuer": pgqueuer,
    "procrastinate": procrastinate,
    "oban": oban,
}


def describe(exc: BaseException) -> str:
    """One line for an error: its type, the first line of its message, and its cause's."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    if exc.__cause__ is not None and exc.__cause__ is not exc:
        text += f" (from {describe(exc.__cause__)})"
    return text


def version(peer: str) -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(peer)
    except PackageNotFoundError:
        return "?"


async def _compare(peer: str, dsn: str, n: int) -> tuple[Rates, Rates]:
    async with PEERS[peer](dsn) as system, bare(dsn) as baseline:
        return await interleave(system, baseline, n)


def measure(peer: str, dsn: str, n: int) -> Measured:
    """The peer and the bare baseline, interleaved, in an event loop of their own."""
    system, baseline = asyncio.run(_compare(peer, dsn, n))
    return Measured(system=system, bare=baseline, version=version(peer), python=sys.version.split()[0])


def main(argv: list[str] | None = None) -> int:
    """``python peers_async.py PEER --n N`` (DSN in MARKUS_BENCH_DSN): one JSON line out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args(argv)
    dsn = os.environ.get(DSN_ENV)
    if not dsn:
        parser.error(f"set {DSN_ENV}")
    try:
        result = measure(args.peer, dsn, args.n)
    except Exception as exc:
        sys.stdout.write(json.dumps({"error": describe(exc)}) + "\n")
        return 1
    sys.stdout.write(json.dumps(asdict(result)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
