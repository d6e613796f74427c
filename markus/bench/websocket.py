"""WebSocket fan-out benchmark: one agent's events to many subscribers over real sockets.

What runs where:
- This process: daphne's real server (the ASGI application of ``markus.asgi``) in a
  thread, and the writer. On SQLite the embedded in-memory channel layer only works
  inside one process, so the server and the writer must share it; with ``REDIS_URL``
  the same topology is kept and every event crosses Redis pub/sub on its way.
- A client subprocess (this module run with ``--client``; its own interpreter, so the
  subscribers do not compete with the server for the GIL): ``S`` WebSocket connections
  authenticated with a session cookie to ``/ws/agents/<id>/``, a minimal RFC 6455
  client on asyncio streams (no client library is a dependency of Markus).

Steps:
1. A throwaway user and agent (external and stopped: no sweep or worker touches it);
   the enqueue wake-up is muted, so only the event reaches the sockets.
2. Baseline, same sockets, same run: the client pings all ``S`` sockets at once and
   times each pong (daphne/autobahn answer a ping themselves: the transport and the
   server's loop without the application or the channel layer); ``PINGS`` such rounds
   before the events, and one more after every ``PING_EVERY`` events (with no event in
   flight), so the baseline is taken under the same load as the events it is set
   beside (this shared machine's load moves within a run).
3. ``K`` times: one transaction enqueues a mailbox item for the agent (which emits one
   ``agent:mailbox`` event); an on-commit callback registered first stamps the commit
   (CLOCK_MONOTONIC, shared by both processes), then the event's own callback sends it.
   The client stamps every frame on arrival; commit -> frame for all ``S`` x ``K``
   frames gives p50/p99. The writer commits the next event once every subscriber has
   the last one (the client reports it), so each fan-out is measured alone, never
   behind a backlog the machine's load built up.
4. Every subscriber must have received every event once and in order, else the run
   fails (a benchmark of a lossy fan-out would be meaningless).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import queue
import re
import statistics
import subprocess
import sys
import threading
import time
from functools import partial
from typing import TYPE_CHECKING, Any

from markus.bench.report import Figure, percentile

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "websocket"
SUBSCRIBERS = 100
DEFAULT_K = 200
MAX_K = 1000
GAP = 0.005  # seconds between one fan-out complete and the next commit
EVENT_TIMEOUT = 10.0  # seconds a fan-out may take before the run counts it lost
PINGS = 20
PING_EVERY = 10  # events between two rounds of pings during the events
PONG_TIMEOUT = 2.0  # seconds a round of pings waits for its pongs
GOAL_P50_MS = 5.0
GOAL_RATIO = 1.5  # commit -> frame p50 within 1.5x a ping -> pong p50 on the same sockets (issue 39)
MARK = "wsbench "
_INDEX = re.compile(rb'"summary": "wsbench (\d+)"')


# ---------------------------------------------------------------------------- the client


class _Subscriber(asyncio.Protocol):
    """One WebSocket connection: the handshake, then server frames (unmasked), each
    stamped when its bytes reach this process (before any parsing)."""

    def __init__(self, on_frame: Any, on_pong: Any) -> None:
        self.on_frame, self.on_pong = on_frame, on_pong
        self.buffer = b""
        self.open = asyncio.get_running_loop().create_future()
        self.frames: list[tuple[int, int]] = []  # (event index, t_ns)
        self.pongs: list[int] = []
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        self.buffer += data
        if not self.open.done():
            head, sep, rest = self.buffer.partition(b"\r\n\r\n")
            if not sep:
                return
            if not head.startswith(b"HTTP/1.1 101"):
                self.open.set_exception(RuntimeError(f"handshake refused: {head.splitlines()[0]!r}"))
                return
            self.buffer = rest
            self.open.set_result(None)
        while len(self.buffer) >= 2:
            length, at = self.buffer[1] & 0x7F, 2
            if length == 126:
                length, at = int.from_bytes(self.buffer[2:4], "big"), 4
            elif length == 127:
                length, at = int.from_bytes(self.buffer[2:10], "big"), 10
            if len(self.buffer) < at + length:
                return
            opcode, payload = self.buffer[0] & 0x0F, self.buffer[at : at + length]
            self.buffer = self.buffer[at + length :]
            if opcode == 0xA:
                self.pongs.append(now)
                self.on_pong()
            elif opcode == 0x1 and (match := _INDEX.search(payload)):
                index = int(match.group(1))
                self.frames.append((index, now))
                self.on_frame(index)

    def ping(self) -> None:
        assert self.transport is not None
        self.transport.write(bytes([0x89, 0x80]) + os.urandom(4))  # FIN + ping, masked, empty


async def _client(cfg: dict[str, Any]) -> dict[str, Any]:
    host, port, path, cookie, s, k = cfg["host"], cfg["port"], cfg["path"], cfg["cookie"], cfg["s"], cfg["k"]
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    received: dict[int, int] = {}  # event index -> subscribers that have it

    def on_frame(index: int) -> None:
        received[index] = got = received.get(index, 0) + 1
        if got == s:  # every subscriber has event ``index``: the writer may commit the next
            del received[index]
            sys.stdout.write(f"{index}\n")
            sys.stdout.flush()
            if index == k - 1:
                done.set()

    ponged = asyncio.Event()
    pongs_due = [0]

    def on_pong() -> None:
        pongs_due[0] -= 1
        if pongs_due[0] == 0:
            ponged.set()

    async def ping_round() -> list[int]:
        """One ping on every socket at once; each pong's time."""
        for sub in subs:
            sub.pongs.clear()
        ponged.clear()
        pongs_due[0] = s
        sent = time.monotonic_ns()
        for sub in subs:
            sub.ping()
        try:
            await asyncio.wait_for(ponged.wait(), timeout=PONG_TIMEOUT)
        except TimeoutError:
            pass
        return [t - sent for sub in subs for t in sub.pongs]

    subs: list[_Subscriber] = []
    for _ in range(s):
        transport, sub = await loop.create_connection(lambda: _Subscriber(on_frame, on_pong), host, port)
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nCookie: {cookie}\r\n\r\n"
            ).encode()
        )
        await asyncio.wait_for(sub.open, timeout=20)
        subs.append(sub)
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    print("ready", flush=True)
    # The baseline: PINGS rounds of one ping on every socket at once, and one more
    # whenever the writer asks (between events).
    pongs: list[int] = []
    for _ in range(PINGS):
        pongs.extend(await ping_round())
        await asyncio.sleep(0.01)
    upfront = len(pongs)
    print("pinged", flush=True)
    await stdin.readline()  # "go": the writer starts
    # Until every event reached every subscriber, or the writer gives up (closes stdin).
    finished = asyncio.ensure_future(done.wait())
    deadline = loop.time() + cfg["timeout"]
    while not finished.done():
        line = asyncio.ensure_future(stdin.readline())
        await asyncio.wait([finished, line], timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED)
        if not line.done():
            line.cancel()
            break
        if line.result().strip() != b"ping":  # b"": the writer gave up
            break
        pongs.extend(await ping_round())
        print("pinged", flush=True)
    finished.cancel()
    for sub in subs:
        assert sub.transport is not None
        sub.transport.close()
    return {"frames": [sub.frames for sub in subs], "pongs": pongs, "upfront": upfront}


def client_main() -> None:
    cfg = json.loads(sys.stdin.readline())
    result = asyncio.run(_client(cfg))
    print(json.dumps(result), flush=True)


# ---------------------------------------------------------------------------- the server


class _Daphne:
    """daphne's Server on 127.0.0.1 (a free port) in a daemon thread. Twisted's reactor
    runs once per process: one server per process."""

    def __init__(self) -> None:
        from daphne.server import Server

        from markus.asgi import application

        self.server = Server(
            application, endpoints=["tcp:port=0:interface=127.0.0.1"], signal_handlers=False, verbosity=0
        )
        self.thread = threading.Thread(target=self.server.run, name="daphne", daemon=True)

    def start(self) -> tuple[str, int]:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.listening_addresses:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("daphne did not start listening")
            time.sleep(0.02)
        host, port = self.server.listening_addresses[0]
        return host, port

    def stop(self) -> None:
        from twisted.internet import reactor

        running: Any = reactor
        running.callFromThread(running.stop)
        self.thread.join(timeout=10)


def _thread_cpu_ns(thread: threading.Thread) -> int | None:
    """CPU time a thread of this process has used (Linux), or None."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _stamp(commits: dict[int, int], i: int) -> None:
    commits[i] = time.monotonic_ns()


def _session_cookie(user: Any) -> str:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from mailbox.models import MailboxItem
    from mailbox.registry import MailboxType
    from mailbox.services import mailbox_enqueue
    from markus.agents.models import Agent
    from markus.agents.services import agent_create
    from markus.bench.mailbox import quiet_wakeups
    from markus.core.ids import new_id

    k = min(options.get("n") or DEFAULT_K, MAX_K)  # ``bench all --n`` is sized for the queues
    s = options.get("subscribers") or SUBSCRIBERS
    # One throwaway user watches with all its sockets: the per-caller cap is lifted
    # for the run (the server is in this process).
    settings.MARKUS["SOCKETS_PER_CALLER"] = max(int(settings.MARKUS["SOCKETS_PER_CALLER"]), s + 8)
    user = User.objects.create_user(new_id("wsbench"))
    agent, _ = agent_create(name="wsbench", kind=Agent.Kind.EXTERNAL, owner=user, agent_id=new_id("wsbench"))
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
    server = _Daphne()
    host, port = server.start()
    cfg: dict[str, Any] = {
        "host": host,
        "port": port,
        "path": f"/ws/agents/{agent.id}/",
        "cookie": _session_cookie(user),
        "s": s,
        "k": k,
        "timeout": 30 + k * (GAP + EVENT_TIMEOUT),
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "markus.bench.websocket", "--client"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    commits: dict[int, int] = {}
    try:
        child.stdin.write(json.dumps(cfg) + "\n")
        child.stdin.flush()
        cpu: list[int | None] = []
        for expected in ("ready", "pinged"):
            line = child.stdout.readline().strip()
            if line != expected:
                raise RuntimeError(f"websocket client: expected {expected!r}, got {line!r}")
            cpu.append(_thread_cpu_ns(server.thread))
        child.stdin.write("go\n")
        child.stdin.flush()
        lines: queue.Queue[str] = queue.Queue()

        def pipe_lines() -> None:
            for line in child.stdout or ():
                lines.put(line)

        threading.Thread(target=pipe_lines, daemon=True).start()
        with quiet_wakeups():
            for i in range(k):
                with transaction.atomic():
                    transaction.on_commit(partial(_stamp, commits, i))  # first: before the event's own
                    mailbox_enqueue(
                        agent_id=agent.id,
                        source_type=MailboxType.SYSTEM_EVENT,
                        payload={"summary": f"{MARK}{i}", "content": f"{MARK}{i}"},
                    )
                try:  # every subscriber has it (or it is lost: the check below says so)
                    reported = lines.get(timeout=EVENT_TIMEOUT).strip()
                except queue.Empty:
                    break
                if reported != str(i):
                    raise RuntimeError(f"websocket client: expected event {i} complete, got {reported!r}")
                if (i + 1) % PING_EVERY == 0 and i + 1 < k:  # a round of pings under the same load
                    child.stdin.write("ping\n")
                    child.stdin.flush()
                    reported = lines.get(timeout=EVENT_TIMEOUT).strip()
                    if reported != "pinged":
                        raise RuntimeError(f"websocket client: expected a round of pings, got {reported!r}")
                time.sleep(GAP)
        child.stdin.close()
        child.wait(timeout=cfg["timeout"])
        cpu.append(_thread_cpu_ns(server.thread))
        tail = []
        while not lines.empty():
            tail.append(lines.get())
        result = json.loads(tail[-1]) if tail else {"frames": [], "pongs": []}
    finally:
        if child.poll() is None:
            child.kill()
        server.stop()
        MailboxItem.objects.filter(agent_id=agent.id).delete()
        agent.delete()
        user.delete()

    latencies: list[float] = []
    for n, got in enumerate(result["frames"]):
        indices = [i for i, _ in got]
        if indices != list(range(k)):
            ordered = indices == sorted(indices)
            raise RuntimeError(f"subscriber {n}: got {len(indices)} of {k} events, in order: {ordered}")
        latencies.extend((t - commits[i]) / 1e6 for i, t in got)
    pongs = [p / 1e6 for p in result["pongs"]]
    p50, p99 = percentile(latencies, 0.5), percentile(latencies, 0.99)
    b50, b99 = percentile(pongs, 0.5), percentile(pongs, 0.99)
    per_frame = per_pong = None
    upfront = result.get("upfront") or len(pongs)
    if None not in cpu and upfront:
        # The pings before the events alone; the frames' share less the pings between them.
        c0, c1, c2 = (c or 0 for c in cpu)
        per_pong = (c1 - c0) / 1e3 / upfront
        per_frame = ((c2 - c1) / 1e3 - per_pong * (len(pongs) - upfront)) / len(latencies)
    stdout.write(
        f"websocket fan-out on {connection.vendor} ({'redis' if _redis() else 'in-memory'} channel layer):"
        f" {s} subscribers x {k} events, {len(latencies)} frames, all in order\n"
        f"commit -> frame: p50 {p50:.2f} ms, p99 {p99:.2f} ms, mean {statistics.fmean(latencies):.2f} ms\n"
        f"baseline ping -> pong on the same {s} sockets at once ({len(pongs)} pongs, before and between"
        f" the events): p50 {b50:.2f} ms, p99 {b99:.2f} ms; commit -> frame p50 / ping -> pong p50:"
        f" {p50 / b50 if b50 else float('nan'):.2f}x\n"
    )
    baseline = f"ping->pong on the same {s} sockets p50 {b50:.2f} ms, p99 {b99:.2f} ms"
    figures = [
        Figure(SUITE, f"commit->frame p50, {s} subscribers", p50, "ms", baseline, GOAL_P50_MS, "lower"),
        Figure(SUITE, f"commit->frame p99, {s} subscribers", p99, "ms", baseline, None, "lower"),
    ]
    if b50:
        ratio = f"commit->frame p50 {p50:.2f} ms / ping->pong p50 {b50:.2f} ms, same sockets, same run"
        figures.append(Figure(SUITE, f"frame / ping p50, {s} subscribers", p50 / b50, "x", ratio, GOAL_RATIO, "lower"))
    if per_frame is not None and per_pong is not None:
        stdout.write(f"server thread CPU: {per_frame:.0f} us per frame sent, {per_pong:.0f} us per ping answered\n")
        pong_text = f"{per_pong:.0f} us per ping answered"
        figures.append(Figure(SUITE, "server CPU per frame", per_frame, "us", pong_text, None, "lower"))
    return figures


def _redis() -> bool:
    from django.conf import settings

    return bool(getattr(settings, "REDIS_URL", ""))


if __name__ == "__main__" and sys.argv[1:] == ["--client"]:
    client_main()
