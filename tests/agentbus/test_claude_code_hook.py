"""The Claude Code hook (agentbus/hooks/claude_code.py) run as Claude Code runs it: the
real script in a subprocess, the event's JSON on stdin, against a live hub, a hub
that is down, one that is slow, and no configuration at all."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agentbus import services
from markus.agents.models import Agent
from markus.agents.services import agent_create

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "agentbus" / "hooks" / "claude_code.py"
PROXY_VARS = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def run_hook(event: dict, *, url: str | None, token: str | None, agent_id: str | None) -> tuple[dict | None, float]:
    """Run the script as Claude Code does; the JSON it printed (None for nothing) and
    how long it took. It must always exit 0."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in PROXY_VARS and not k.startswith("MARKUS_")}
    env.update(
        {k: v for k, v in {"MARKUS_HUB_URL": url, "MARKUS_TOKEN": token, "MARKUS_AGENT_ID": agent_id}.items() if v}
    )
    event = {"session_id": "s-1", "transcript_path": "/tmp/t.jsonl", "cwd": str(ROOT), **event}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(SCRIPT)],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        env=env,
        cwd="/",  # nothing of the project on the path: the script stands alone
        timeout=30,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    out = done.stdout.strip()
    return (json.loads(out) if out else None), elapsed


def send(sender: Agent, recipient: Agent, text: str, **kwargs) -> None:
    stream = services.stream_open(sender=sender, recipient=recipient, **kwargs)
    services.stream_append(stream_id=stream.id, sender=sender, payload={"text": text})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def pair(alice, team):
    eve, eve_token = agent_create(
        name="Eve", role="engineer", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="eve"
    )
    max_, _ = agent_create(
        name="Max", role="engineer", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="max"
    )
    return eve, eve_token, max_


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_hub_up_context_then_block_then_allow(live_server, pair):
    eve, token, max_ = pair
    hook = {"url": live_server.url, "token": token, "agent_id": eve.id}
    send(max_, eve, "main is red: look at test_drain before you push", topic="ci.alert")

    out, _ = run_hook({"hook_event_name": "SessionStart", "source": "startup"}, **hook)
    assert out is not None
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    context = out["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("Messages for you on the Markus AgentBus:")
    assert "main is red: look at test_drain before you push" in context
    assert "max" in context and "topic ci.alert" in context
    assert "more waiting" not in context

    out, _ = run_hook({"hook_event_name": "UserPromptSubmit", "prompt": "go on"}, **hook)
    assert out is None, "drained: nothing the second time"

    send(max_, eve, "also rebase on main")
    out, _ = run_hook({"hook_event_name": "Stop", "stop_hook_active": False}, **hook)
    assert out is not None and out["decision"] == "block"
    assert "also rebase on main" in out["reason"]
    assert "main is red" not in out["reason"], "never the same messages twice"

    out, _ = run_hook({"hook_event_name": "Stop", "stop_hook_active": True}, **hook)
    assert out is None, "nothing new: the stop is allowed"


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_hub_up_bounded_and_the_rest_stays_waiting(live_server, pair):
    eve, token, max_ = pair
    hook = {"url": live_server.url, "token": token, "agent_id": eve.id}
    for n in range(60):
        send(max_, eve, f"note {n:02d} " + "x" * 300)

    out, _ = run_hook({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}, **hook)
    context = out["hookSpecificOutput"]["additionalContext"]
    assert len(context.rsplit("\n", 1)[0]) <= 8000, "the messages fit in about 8,000 characters"
    shown = context.count("\n- ")
    assert 0 < shown < 60 and "note 00" in context
    assert f"({60 - shown} more waiting" in context

    out, _ = run_hook({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}, **hook)
    assert f"note {shown:02d}" in out["hookSpecificOutput"]["additionalContext"], "the rest was kept, in order"


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_hub_up_wrong_token_fails_open(live_server, pair):
    eve, _, max_ = pair
    send(max_, eve, "hello")
    out, _ = run_hook(
        {"hook_event_name": "Stop", "stop_hook_active": False}, url=live_server.url, token="nope", agent_id=eve.id
    )
    assert out is None


@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop"])
def test_hub_down(event):
    url = f"http://127.0.0.1:{free_port()}"  # closed: nothing listens
    out, elapsed = run_hook({"hook_event_name": event, "stop_hook_active": False}, url=url, token="t", agent_id="eve")
    assert out is None
    assert elapsed < 2.5


class SlowHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(10)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"agentId": "eve", "pending": 3}')

    do_POST = do_GET

    def log_message(self, *args) -> None:
        pass


class SlowServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address) -> None:
        pass  # the hook hung up long ago: a broken pipe is expected


@pytest.fixture
def slow_hub():
    server = SlowServer(("127.0.0.1", 0), SlowHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("event", ["SessionStart", "Stop"])
def test_hub_slow(slow_hub, event):
    out, elapsed = run_hook(
        {"hook_event_name": event, "stop_hook_active": False}, url=slow_hub, token="t", agent_id="eve"
    )
    assert out is None
    assert elapsed < 2.5


@pytest.mark.parametrize("missing", ["url", "token", "agent_id"])
def test_missing_env(missing):
    config = {"url": "http://127.0.0.1:9", "token": "t", "agent_id": "eve", missing: None}
    out, elapsed = run_hook({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}, **config)
    assert out is None
    assert elapsed < 2.5
