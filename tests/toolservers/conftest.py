"""Real tool servers for the tests: the reference ``mcp-server-git`` over stdio on a
repository made here, and ``counter_server.py`` (built with the SDK) over Streamable
HTTP; the model is the openai SDK against a local stub that picks its tool from those
offered (``Model``)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from markus.toolservers.models import ToolServer
from markus.toolservers.runtime import runtime
from tests.attention.conftest import celery_worker, wait_for, wake_on_enqueue
from tests.llm.stub_openai import StubOpenAI

HERE = Path(__file__).resolve().parent
GIT_SERVER = shutil.which("mcp-server-git", path=str(Path(sys.executable).parent)) or "mcp-server-git"
SUBJECT = "Teach the parser about tabs"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Ada", "-c", "user.email=ada@example.org", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def commits(repo: Path) -> int:
    return int(git(repo, "rev-list", "--count", "HEAD").strip())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with two commits (the last: ``SUBJECT``) and a staged change."""
    path = tmp_path / "demo-repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README").write_text("hello\n")
    git(path, "add", "README")
    git(path, "commit", "-q", "-m", "First commit")
    (path / "parser.py").write_text("TAB = '\\t'\n")
    git(path, "add", "parser.py")
    git(path, "commit", "-q", "-m", SUBJECT)
    (path / "NOTES").write_text("staged\n")
    git(path, "add", "NOTES")
    return path


@pytest.fixture
def stop_servers() -> Iterator[None]:
    """Every connection this test process opened is closed (its stdio servers stopped)."""
    yield
    runtime().shutdown()


@pytest.fixture
def inline_tools(settings, monkeypatch) -> None:
    """Every tool of the servers offered directly with each request, as up to
    ``MARKUS["TOOLSERVER_INLINE_TOOLS"]`` of them are (the git server has more: past the
    setting they are found on demand, test_tool_search.py)."""
    monkeypatch.setitem(settings.MARKUS, "TOOLSERVER_INLINE_TOOLS", 100)


@pytest.fixture
def allow_private(settings) -> None:
    """http tool servers on this machine allowed (``MARKUS_TOOLSERVER_ALLOW_PRIVATE``), as
    the local test servers on 127.0.0.1 need; a copy of ``MARKUS``, never the dict itself."""
    settings.MARKUS = {**settings.MARKUS, "TOOLSERVER_ALLOW_PRIVATE": True}


@pytest.fixture
def git_server(repo: Path, stop_servers: None) -> ToolServer:
    return ToolServer.objects.create(
        name="git",
        transport="stdio",
        command=GIT_SERVER,
        args=["--repository", str(repo)],
        description=f"the repository at {repo}",
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Counter:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log

    def lines(self, kind: str, marker: str) -> int:
        text = self.log.read_text() if self.log.exists() else ""
        return sum(1 for line in text.splitlines() if line == f"{kind} {marker}")


@pytest.fixture
def local_counter(tmp_path: Path, stop_servers: None) -> Iterator[Counter]:
    """counter_server.py on a free port of 127.0.0.1 (Streamable HTTP); this machine is
    not allowed by this fixture (``counter`` allows it)."""
    port, log = free_port(), tmp_path / "effects.log"
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "counter_server.py"), "--port", str(port), "--log", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("counter_server.py did not start") from None
                time.sleep(0.1)
        yield Counter(f"http://127.0.0.1:{port}/mcp", log)
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def counter(local_counter: Counter, allow_private: None) -> Counter:
    """counter_server.py on a free port (Streamable HTTP), on this machine (allowed)."""
    return local_counter


def offered_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def last_tool_result(body: dict[str, Any]) -> str | None:
    messages = body["messages"]
    return str(messages[-1].get("content")) if messages and messages[-1].get("role") == "tool" else None


class Model:
    """A stub model: the first turn calls the offered tool whose name ends with
    ``suffix`` (with ``arguments``); the next answers with what the tool returned.
    Offered no such tool, it says so."""

    def __init__(self, suffix: str, arguments: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self.suffix, self.arguments = suffix, arguments
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.bodies.append(body)
        result = last_tool_result(body)
        if result is not None:
            return {"content": f"The tool said: {result}"}
        for name in offered_names(body):
            if name.endswith(self.suffix):
                tool = next(t for t in body["tools"] if t["function"]["name"] == name)
                return {"tool_calls": [(name, self.arguments(tool["function"]))]}
        return {"content": f"I have no tool ending in {self.suffix}."}


@pytest.fixture
def model(settings, monkeypatch) -> Iterator[Callable[[Model], StubOpenAI]]:
    """Point the openai provider at a stub answering as ``Model``."""
    stubs: list[StubOpenAI] = []

    def use(m: Model) -> StubOpenAI:
        stub = StubOpenAI([], chooser=m).__enter__()
        stubs.append(stub)
        for key, value in {
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": stub.url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "stub-model",
        }.items():
            monkeypatch.setitem(settings.MARKUS, key, value)
        return stub

    yield use
    for stub in stubs:
        stub.__exit__(None, None, None)


def result_of(text: str) -> dict[str, Any]:
    """The JSON a tool result carries after ``The tool said: ``."""
    return json.loads(text.split("The tool said: ", 1)[1])


__all__ = ["celery_worker", "wait_for", "wake_on_enqueue"]
