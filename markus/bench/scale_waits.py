"""Scale case ``waits`` (``manage.py bench scale``, ``MARKUS_BENCH_SCALE=waits``): idle
waits at rest, woken waits and door calls, over real sockets, each beside its baseline
from the same run.

What runs where:
- This process: daphne's real server (``markus.asgi``, the handler every door goes
  through) in a thread, the database and the writer. With the embedded (in-memory)
  channel layer the writer must share the server's process; with Redis the same
  topology is kept and every wake-up crosses Redis pub/sub.
- A client subprocess (this module with ``--client``, its own interpreter, so the
  clients do not compete with the server for the GIL): raw HTTP/1.1 on asyncio streams
  and redis-py for the BRPOP baseline.

Figures:
1. Idle: ``W`` (512) inbox waits parked over REST on 8 agents; the server process's CPU
   time over a 10 s window while nothing happens (main thread asleep, the client in its
   own process), as a share of one core, beside the same window with no wait parked;
   and the SQL statements every thread of the server ran in the window, per second.
   Then the same window with ``W`` bus requests parked over REST (``POST
   /api/agentbus/request``, each waiting for its reply: ``waiting.stream_request``),
   answered afterwards by their recipient.
2. Memory per parked wait (tracemalloc, the server's whole request: daphne, Django,
   the door): ``W`` REST waits, then ``W`` MCP ``inbox_wait`` calls; MCP / REST.
3. Woken wait: a client parks a wait, the writer appends one message (its commit
   stamped by an on-commit callback, CLOCK_MONOTONIC shared by both processes), the
   client stamps the answer's last byte; REST and MCP, each round alternating with a
   BRPOP round (the client blocks in BRPOP, the writer stamps and LPUSHes). Ratio of
   medians (and p99s) to BRPOP's. Goal: 3.
4. A call that does not wait (``timeout_seconds=0``) beside a one-row GET
   (``/api/agents/<id>/``), alternating on two keep-alive connections. Goal: 2.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from markus.bench.report import Figure, percentile

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "scale"
PARKED = 512
WATCHERS = 8
IDLE_WINDOW = 10.0
ROUNDS = 100
WARMUP = 10
PAUSE = 0.003  # between the wait parked (or BRPOP sent) and the append (or LPUSH)
GOAL_WOKEN = 3.0
GOAL_CALL = 2.0
MCP_ACCEPT = "application/json, text/event-stream"


# ---------------------------------------------------------------------------- the client


class _Conn:
    """One keep-alive HTTP/1.1 connection; ``request`` answers (status, body, the
    monotonic ns at which the answer's last byte arrived)."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def send(self, req: dict[str, Any]) -> None:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        body = json.dumps(req["body"]).encode() if req.get("body") is not None else b""
        head = [f"{req.get('method', 'GET')} {req['path']} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        head += [f"{k}: {v}" for k, v in req.get("headers", {}).items()]
        if body:
            head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)

    async def answer(self) -> tuple[int, bytes, int]:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding") == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                parts.append(await self.reader.readexactly(size + 2))
                if size == 0:
                    break
            body = b"".join(p[:-2] for p in parts)
        else:
            body = await self.reader.read()
            self.writer = None
        return status, body, time.monotonic_ns()

    async def request(self, req: dict[str, Any]) -> tuple[int, bytes, int]:
        await self.send(req)
        return await self.answer()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def _result(body: bytes) -> dict[str, Any]:
    """The wait's answer in a REST body or an MCP one (JSON or server-sent events)."""
    text = body.decode()
    if text.lstrip().startswith("{"):
        doc = json.loads(text)
    else:
        doc = next(json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and '"id"' in line)
    if "jsonrpc" in doc:
        result: dict[str, Any] = doc["result"]
        return result.get("structuredContent") or json.loads(result["content"][0]["text"])
    return dict(doc)


def _with_cursor(req: dict[str, Any], cursor: str | None) -> dict[str, Any]:
    req = json.loads(json.dumps(req))
    if cursor is None:
        return req
    if req.get("body") is not None:
        req["body"]["params"]["arguments"]["after_cursor"] = cursor
    else:
        req["path"] = req["path"].split("&after_cursor=")[0] + f"&after_cursor={cursor}"
    return req


async def _client(host: str, port: int, redis_url: str) -> None:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    parked: list[tuple[_Conn, asyncio.Future[Any]]] = []

    def say(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    while line := (await stdin.readline()).decode().strip():
        cmd = json.loads(line)
        op = cmd["op"]
        if op == "park":  # one connection per wait, each request sent, answers awaited later
            for req in cmd["requests"]:
                conn = _Conn(host, port)
                await conn.send(req)
                parked.append((conn, asyncio.ensure_future(conn.answer())))
            say("parked")
        elif op == "collect":  # every parked wait has been woken: its answer
            statuses = [(await answer)[0] for _, answer in parked]
            for conn, _ in parked:
                conn.close()
            parked = []
            say(json.dumps({"statuses": statuses}))
        elif op == "calls":  # alternate two requests on two keep-alive connections
            a, b = _Conn(host, port), _Conn(host, port)
            times: dict[str, list[float]] = {"a": [], "b": []}
            for i in range(cmd["n"] + WARMUP):
                for name, conn in (("a", a), ("b", b)):
                    started = time.monotonic_ns()
                    status, _, done = await conn.request(cmd[name])
                    if status != 200:
                        raise RuntimeError(f"{cmd[name]['path']} answered {status}")
                    if i >= WARMUP:
                        times[name].append((done - started) / 1e6)
            a.close()
            b.close()
            say(json.dumps(times))
        elif op == "woken":  # per round: one wait woken by an append, one BRPOP
            import redis

            popper = redis.Redis.from_url(redis_url)
            conn, cursor = _Conn(host, port), cmd["cursor"]
            for i in range(cmd["n"] + WARMUP):
                await conn.send(_with_cursor(cmd["req"], cursor))
                say(f"sent {i}")
                status, body, done = await conn.answer()
                if status != 200:
                    raise RuntimeError(f"the wait answered {status}: {body[:200]!r}")
                result = _result(body)
                if not result.get("messages"):
                    raise RuntimeError(f"the wait answered without the message: {result}")
                cursor = result["next_cursor"]
                say(f"got {i} {done}")
                say(f"brpop {i}")
                await asyncio.to_thread(popper.brpop, [cmd["key"]], 10)
                say(f"popped {i} {time.monotonic_ns()}")
            conn.close()
            say("done")


def client_main() -> None:
    host, port, redis_url = sys.argv[2], int(sys.argv[3]), sys.argv[4]
    asyncio.run(_client(host, port, redis_url))


# ---------------------------------------------------------------------------- the server


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Statements:
    """Counts the SQL statements every thread of this process runs while on."""

    def __init__(self) -> None:
        from django.db.backends import utils

        self.count, self.on = 0, False
        self._lock = threading.Lock()
        self._real = utils.CursorWrapper.execute
        outer = self

        def execute(cursor: Any, sql: str, params: Any = None) -> Any:
            if outer.on:
                with outer._lock:
                    outer.count += 1
            return outer._real(cursor, sql, params)

        utils.CursorWrapper.execute = execute  # type: ignore[method-assign,assignment]

    def close(self) -> None:
        from django.db.backends import utils

        utils.CursorWrapper.execute = self._real  # type: ignore[method-assign]


class _Child:
    def __init__(self, host: str, port: int, redis_url: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "markus.bench.scale_waits", "--client", host, str(port), redis_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, cmd: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the bench client died (its traceback is above)")
        return line.strip()

    def expect(self, prefix: str) -> str:
        line = self.line()
        if not line.startswith(prefix):
            raise RuntimeError(f"bench client: expected {prefix!r}, got {line!r}")
        return line

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _parked_count() -> int:
    """Waits that have read once and sleep (``wakeup.parked_waiters``); a build without it
    (before issue 39) counts waits registered for their wake-up, which it did just before
    the read."""
    from agentbus import wakeup

    counter = getattr(wakeup, "parked_waiters", wakeup.registered_waiters)
    return int(counter())


def _wakeup_registered() -> int:
    from agentbus import wakeup

    return int(wakeup.registered_waiters())


def _at_least(n: int, count: Callable[[], int], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while count() < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {count()} of {n} {what}")
        time.sleep(0.001)


def _registered_at_least(n: int, timeout: float = 120) -> None:
    _at_least(n, _parked_count, "waits parked", timeout)


def _requests_waiting_at_least(n: int, timeout: float = 120) -> None:
    """Until ``n`` waiters are registered for their wake-up (every build registers a
    request's before its first read of the reply), then a second for those reads."""
    _at_least(n, _wakeup_registered, "requests wait", timeout)
    time.sleep(1.0)


def _stamp(into: list[int]) -> None:
    into.append(time.monotonic_ns())


def _in_own_process(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    """Twisted's reactor runs once per process: after another suite's server (``bench
    all``: the websocket suite) this case runs in a process of its own, its figures read
    back from its ``--json``."""
    import tempfile

    from django.conf import settings

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "figures.json")
        argv = [sys.executable, str(settings.BASE_DIR / "manage.py"), "bench", "scale", "--json", path]
        if options.get("n"):
            argv += ["--n", str(options["n"])]
        done = subprocess.run(
            argv, env={**os.environ, "MARKUS_BENCH_SCALE": "waits"}, capture_output=True, text=True, check=False
        )
        stdout.write(done.stdout)
        if done.returncode != 0 or not os.path.exists(path):
            raise RuntimeError(f"the waits case in its own process failed: {done.stderr[-2000:]}")
        with open(path) as f:
            doc = json.load(f)
    fields = set(Figure.__dataclass_fields__)
    return [Figure(**{k: v for k, v in f.items() if k in fields}) for f in doc["figures"]]


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    from twisted.internet import reactor

    if getattr(reactor, "_startedBefore", False) or getattr(reactor, "running", False):
        return _in_own_process(stdout, options)
    import redis
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from agentbus import services
    from agentbus.cursors import encode_cursor
    from agentbus.models import AuditEvent, ConsumerCursor
    from agentbus.selectors import current_clock
    from markus.agents.models import Agent
    from markus.agents.services import agent_create
    from markus.bench.websocket import _Daphne

    def write(text: str) -> None:
        stdout.write(text + "\n")

    m = options.get("waiters") or PARKED
    n = min(options.get("n") or ROUNDS, 1000)
    redis_url = getattr(settings, "REDIS_URL", "") or os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    for name in ("WAITS_PER_CALLER", "WAITS_PER_PERSON", "WAITS_PER_SERVER"):
        settings.MARKUS[name] = max(int(settings.MARKUS[name]), 4 * m)
    tag = uuid.uuid4().hex[:8]
    writer = agent_create(name="bench writer", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-wait-{tag}-w")[0]
    watchers = [
        agent_create(name=f"bench watcher {i}", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-wait-{tag}-{i}")
        for i in range(WATCHERS)
    ]
    # The requests' parties share an owner (an agent nobody owns sees only itself).
    owner = User.objects.create_user(f"bench-wait-{tag}")
    responder = agent_create(
        name="bench responder", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-wait-{tag}-r", owner=owner
    )[0]
    askers = [
        agent_create(name=f"bench asker {i}", kind=Agent.Kind.EXTERNAL, agent_id=f"bench-wait-{tag}-a{i}", owner=owner)
        for i in range(WATCHERS)
    ]
    ids = [writer.id, responder.id] + [a.id for a, _ in watchers + askers]
    Agent.objects.filter(id__in=ids).update(status=Agent.RunStatus.STOPPED)
    streams = {a.id: services.stream_open(sender=writer, recipient=a).id for a, _ in watchers}
    layer = settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", "").rsplit(".", 1)[-1]
    name = f"{connection.vendor}, {layer}"
    write(f"scale waits: {m} parked waits, {n} woken rounds ({name})")

    # Every wait starts after everything written so far (a wait without a cursor would
    # answer at once with what earlier phases left in the inbox).
    def rest(i: int, timeout: float = 60) -> dict[str, Any]:
        agent, token = watchers[i % WATCHERS]
        cursor = encode_cursor(agent.id, current_clock())
        path = f"/api/agents/{agent.id}/agentbus/inbox?timeout_seconds={timeout:g}&after_cursor={cursor}"
        return {"path": path, "headers": {"Authorization": f"Bearer {token}"}}

    def mcp(i: int, timeout: float = 60) -> dict[str, Any]:
        agent, token = watchers[i % WATCHERS]
        cursor = encode_cursor(agent.id, current_clock())
        call = {"name": "inbox_wait", "arguments": {"timeout_seconds": timeout, "after_cursor": cursor}}
        return {
            "method": "POST",
            "path": "/mcp/",
            "headers": {"Authorization": f"Bearer {token}", "Accept": MCP_ACCEPT},
            "body": {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": call},
        }

    def ask(i: int, timeout: float = 120) -> dict[str, Any]:
        agent, token = askers[i % WATCHERS]
        body = {"sender": agent.id, "recipient": responder.id, "payload": {"n": i}, "timeoutSeconds": timeout}
        return {
            "method": "POST",
            "path": "/api/agentbus/request",
            "headers": {"Authorization": f"Bearer {token}"},
            "body": body,
        }

    def answer_all() -> None:
        from agentbus.models import Stream

        asked = Stream.objects.filter(recipient=responder, reply_to__isnull=True, closed_at__isnull=True)
        for stream_id in asked.values_list("id", flat=True):
            services.stream_reply(responder=responder, stream_id=stream_id, payload={"text": "done"})

    def wake_all() -> None:
        for a, _ in watchers:
            services.stream_append(stream_id=streams[a.id], sender=writer, payload={"text": "release"})

    server = _Daphne()
    host, port = server.start()
    child = _Child(host, port, redis_url)
    statements = _Statements()
    figures: list[Figure] = []
    try:
        # 1. idle: no wait, then m parked waits; CPU and statements over the window
        windows: dict[str, tuple[float, float]] = {}
        for label, count in (("none", 0), ("parked", m)):
            if count:
                base = _parked_count()
                child.send({"op": "park", "requests": [rest(i) for i in range(count)]})
                child.expect("parked")
                _registered_at_least(base + count)
                time.sleep(1.0)  # every wait has read once and sleeps
            statements.count, statements.on = 0, True
            cpu, wall = _cpu_seconds(), time.monotonic()
            time.sleep(IDLE_WINDOW)
            cpu, wall = _cpu_seconds() - cpu, time.monotonic() - wall
            statements.on = False
            windows[label] = (cpu / wall, statements.count / wall)
            if count:
                wake_all()
                child.send({"op": "collect"})
                json.loads(child.line())
        # the same window with m parked bus requests
        base = _wakeup_registered()
        child.send({"op": "park", "requests": [ask(i) for i in range(m)]})
        child.expect("parked")
        _requests_waiting_at_least(base + m)
        statements.count, statements.on = 0, True
        cpu, wall = _cpu_seconds(), time.monotonic()
        time.sleep(IDLE_WINDOW)
        cpu, wall = _cpu_seconds() - cpu, time.monotonic() - wall
        statements.on = False
        windows["requests"] = (cpu / wall, statements.count / wall)
        answer_all()
        child.send({"op": "collect"})
        statuses = json.loads(child.line())["statuses"]
        if statuses != [200] * m:
            write(f"  requests answered {sorted(set(statuses))}")
        idle, parked, asking = windows["none"], windows["parked"], windows["requests"]
        write(
            f"  idle server: CPU {idle[0] * 100:.1f} % of a core, {idle[1]:.1f} statements/s; "
            f"{m} parked REST waits: CPU {parked[0] * 100:.1f} %, {parked[1]:.1f} statements/s; "
            f"{m} parked requests: CPU {asking[0] * 100:.1f} %, {asking[1]:.1f} statements/s"
        )
        period = float(settings.MARKUS["AGENTBUS_POLL_SECONDS"])
        for what, (cpu_share, per_second) in ((f"{m} parked waits", parked), (f"{m} parked bus requests", asking)):
            figures.append(
                Figure(
                    suite=SUITE,
                    name=f"server CPU with {what}, % of a core over {IDLE_WINDOW:g} s ({name})",
                    value=round(cpu_share * 100, 2),
                    unit="%",
                    baseline=f"the same server with no wait: {idle[0] * 100:.2f} %",
                    goal=round(idle[0] * 100 + 2.0, 2),
                    better="lower",
                )
            )
            figures.append(
                Figure(
                    suite=SUITE,
                    name=f"SQL statements per second with {what} ({name})",
                    value=round(per_second, 2),
                    unit="/s",
                    baseline=f"no wait: {idle[1]:.2f}/s; one backstop read per period is {1 / period:.2f}/s",
                    goal=round(idle[1] + 2 / period, 2),
                    better="lower",
                )
            )

        # 2. memory per parked wait, REST then MCP
        per_wait: dict[str, float] = {}
        for label, make in (("REST", rest), ("MCP", mcp)):
            base = _parked_count()
            tracemalloc.start()
            before = tracemalloc.get_traced_memory()[0]
            child.send({"op": "park", "requests": [make(i) for i in range(m)]})
            child.expect("parked")
            try:
                _registered_at_least(base + m)
                time.sleep(1.0)
                per_wait[label] = (tracemalloc.get_traced_memory()[0] - before) / m
            except RuntimeError as exc:
                write(f"  memory per parked {label} wait not measured: {exc}")
            tracemalloc.stop()
            wake_all()
            child.send({"op": "collect"})
            statuses = json.loads(child.line())["statuses"]
            if statuses != [200] * m:
                write(f"  {label} waits answered {sorted(set(statuses))}")
        if len(per_wait) == 2:
            write(
                f"  memory per parked wait: REST {per_wait['REST'] / 1024:.1f} KB, MCP {per_wait['MCP'] / 1024:.1f} KB"
            )
            figures.append(
                Figure(
                    suite=SUITE,
                    name=f"memory per parked MCP inbox_wait / per parked REST wait ({name})",
                    value=round(per_wait["MCP"] / per_wait["REST"], 2),
                    unit="x",
                    baseline=f"REST {per_wait['REST'] / 1024:.1f} KB, MCP {per_wait['MCP'] / 1024:.1f} KB "
                    "(tracemalloc, the whole request)",
                    goal=1.0,
                    better="lower",
                )
            )

        # 3. woken waits against BRPOP, alternating rounds
        pusher = redis.Redis.from_url(redis_url)
        for label, make in (("REST", rest), ("MCP", mcp)):
            key = f"markus:bench:brpop:{uuid.uuid4().hex}"
            stream_id = streams[watchers[0][0].id]
            cursor = encode_cursor(watchers[0][0].id, current_clock())  # after everything so far
            child.send({"op": "woken", "req": make(0, 10), "key": key, "n": n, "cursor": cursor})
            woken: list[float] = []
            popped: list[float] = []
            base = _parked_count()
            for i in range(n + WARMUP):
                child.expect(f"sent {i}")
                _registered_at_least(base + 1, 15)
                time.sleep(PAUSE)
                stamp: list[int] = []
                with transaction.atomic():
                    transaction.on_commit(partial(_stamp, stamp))  # before the append's own wake-up
                    services.stream_append(stream_id=stream_id, sender=writer, payload={"n": i})
                got = int(child.expect(f"got {i} ").split()[2])
                child.expect(f"brpop {i}")
                time.sleep(PAUSE)
                pushed = time.monotonic_ns()
                pusher.lpush(key, b"x")
                done = int(child.expect(f"popped {i} ").split()[2])
                if i >= WARMUP:
                    woken.append((got - stamp[0]) / 1e6)
                    popped.append((done - pushed) / 1e6)
            child.expect("done")
            pusher.delete(key)
            w50, w99 = percentile(woken, 0.5), percentile(woken, 0.99)
            b50, b99 = percentile(popped, 0.5), percentile(popped, 0.99)
            write(
                f"  woken {label} wait: p50 {w50:.3f} ms, p99 {w99:.3f} ms; BRPOP p50 {b50:.3f} ms, "
                f"p99 {b99:.3f} ms: {w50 / b50:.1f}x, p99 {w99 / b99:.1f}x"
            )
            for q, value, base_value in (("p50", w50, b50), ("p99", w99, b99)):
                figures.append(
                    Figure(
                        suite=SUITE,
                        name=f"woken {label} wait {q} / BRPOP {q}, over HTTP ({name})",
                        value=round(value / base_value, 2),
                        unit="x",
                        baseline=f"BRPOP {q} {base_value:.3f} ms; wait {q} {value:.3f} ms",
                        goal=GOAL_WOKEN,
                        better="lower",
                    )
                )

        # 4. a call that does not wait, beside a one-row GET
        agent, token = watchers[0]
        auth = {"Authorization": f"Bearer {token}"}
        call = {"path": f"/api/agents/{agent.id}/agentbus/inbox?timeout_seconds=0", "headers": auth}
        row = {"path": f"/api/agents/{agent.id}/", "headers": auth}
        child.send({"op": "calls", "a": call, "b": row, "n": n})
        times = json.loads(child.line())
        c50, r50 = statistics.median(times["a"]), statistics.median(times["b"])
        write(f"  inbox call (timeout 0) p50 {c50:.3f} ms; one-row GET p50 {r50:.3f} ms: {c50 / r50:.2f}x")
        figures.append(
            Figure(
                suite=SUITE,
                name=f"inbox call that does not wait p50 / one-row GET p50 ({name})",
                value=round(c50 / r50, 2),
                unit="x",
                baseline=f"GET /api/agents/<id>/ p50 {r50:.3f} ms; inbox {c50:.3f} ms",
                goal=GOAL_CALL,
                better="lower",
            )
        )
    finally:
        statements.close()
        child.close()
        server.stop()
        AuditEvent.objects.filter(agent_id__in=ids).delete()
        ConsumerCursor.objects.filter(agent_id__in=ids).delete()
        Agent.objects.filter(id__in=ids).delete()
        owner.delete()
    return figures


if __name__ == "__main__" and sys.argv[1:2] == ["--client"]:
    client_main()
