"""With two git servers attached, the offline brain reads the one the question names (by
the server's name, or by the repository its description names), not the first
``__git_log`` it is offered (issue 37, point 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from markus.toolservers.models import ToolServer

from .conftest import GIT_SERVER, SUBJECT, git

pytestmark = pytest.mark.django_db(transaction=True)

DOCS_SUBJECT = "Explain the handbook's table of contents"


@pytest.fixture
def docs_server(tmp_path: Path, stop_servers: None) -> ToolServer:
    """``docs-git`` on a second repository, ``handbook``, whose last commit is ``DOCS_SUBJECT``."""
    path = tmp_path / "handbook"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "CONTENTS").write_text("1. Start\n")
    git(path, "add", "CONTENTS")
    git(path, "commit", "-q", "-m", DOCS_SUBJECT)
    return ToolServer.objects.create(
        name="docs-git",
        transport="stdio",
        command=GIT_SERVER,
        args=["--repository", str(path)],
        description=f"the handbook repository at {path}",
    )


def ask(client, agent, text: str) -> str:
    r = client.post(f"/api/agents/{agent.id}/chat", {"text": text}, format="json")
    assert r.status_code == 200, r.content
    return str(r.json()["reply"])


@pytest.mark.parametrize("offered", ["on demand", "inline"])
@pytest.mark.parametrize(
    ("question", "subject"),
    [
        ("What is the last commit in docs-git?", DOCS_SUBJECT),
        ("What is the latest commit of the handbook repository?", DOCS_SUBJECT),
        ("What is the last commit in the git repository?", SUBJECT),  # docs-git's tools are offered first
    ],
)
def test_the_offline_brain_reads_the_git_server_the_question_names(
    celery_worker, agent, alice_client, git_server, docs_server, offered, question, subject, request
):
    if offered == "inline":
        request.getfixturevalue("inline_tools")
    git_server.agents.add(agent)
    docs_server.agents.add(agent)

    reply = ask(alice_client, agent, question)

    other = SUBJECT if subject == DOCS_SUBJECT else DOCS_SUBJECT
    assert f"The last commit is “{subject}”" in reply and other not in reply
