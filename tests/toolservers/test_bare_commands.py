"""A stdio server registered with a bare command, as the README registers
``mcp-server-git``, starts under ``make run`` (issue 37, point 7): the command is looked
up in the interpreter's own ``bin`` first (the virtualenv the README runs Markus from),
then on ``PATH``; the server's process need not have the virtualenv on its ``PATH``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from markus.toolservers.models import ServerState, ToolServer
from markus.toolservers.offered import refresh
from markus.toolservers.runtime import executable

pytestmark = pytest.mark.django_db

BIN = Path(sys.executable).parent


@pytest.fixture
def path_without_the_venv(monkeypatch) -> None:
    """The server's PATH as ``make run`` leaves it: the system's, not the virtualenv's."""
    kept = [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p and Path(p) != BIN]
    monkeypatch.setenv("PATH", os.pathsep.join(kept) or os.defpath)


def test_a_bare_command_found_only_in_the_virtualenv_lists_its_tools(repo, stop_servers, path_without_the_venv):
    assert (BIN / "mcp-server-git").exists()
    server = ToolServer.objects.create(
        name="git", transport="stdio", command="mcp-server-git", args=["--repository", str(repo)]
    )

    tools = refresh(server)

    server.refresh_from_db()
    assert "git_log" in {t["name"] for t in tools}, server.last_error
    assert server.state == ServerState.READY and server.last_error == ""


def test_a_command_with_a_path_is_run_as_given():
    assert executable("./bin/mcp-server-git") == "./bin/mcp-server-git"
    assert executable("git") == "git"  # not in the virtualenv: the process finds it on PATH


def test_a_bare_command_missing_everywhere_fails_naming_it(stop_servers, path_without_the_venv):
    server = ToolServer.objects.create(name="nope", transport="stdio", command="no-such-mcp-server")

    assert refresh(server) == []

    server.refresh_from_db()
    assert server.state == ServerState.FAILING and "no-such-mcp-server" in server.last_error
