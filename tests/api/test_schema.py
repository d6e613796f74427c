"""The OpenAPI description: served, typed, Swagger UI from local files, and schemathesis
against a running server finds no 5xx and no answer the description does not document."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def schema(alice_client):
    r = alice_client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert r.status_code == 200
    import json

    return json.loads(r.content)


@pytest.mark.django_db
def test_every_operation_has_a_typed_success_response(schema):
    untyped = []
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            ok = {code: resp for code, resp in op["responses"].items() if code.startswith("2")}
            if not ok or not any("content" in resp for resp in ok.values()):
                untyped.append(f"{method.upper()} {path}")
    assert untyped == []
    assert "/api/agents/{agent_id}/chat" in schema["paths"]
    assert {"agentBearer", "tokenAuth"} <= set(schema["components"]["securitySchemes"])


@pytest.mark.django_db
def test_every_operation_documents_the_400_of_bad_input_at_the_edge(schema, alice_client):
    missing = [
        f"{method.upper()} {path}"
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
        if "400" not in op["responses"]
    ]
    assert missing == []
    # A query refused at the edge, on an operation that takes no parameter of its own:
    r = alice_client.get("/api/teams/?a%00b=1")
    assert r.status_code == 400 and r.json()["code"] and r.json()["detail"]


@pytest.mark.django_db
def test_swagger_ui_is_served_from_local_static_files(alice_client):
    html = alice_client.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any("swagger-ui" in a for a in assets)
    assert all(a.startswith("/") for a in assets if "swagger" in a), assets  # nothing from a CDN


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(base: str, token: str, path: str, body: dict) -> dict:
    import json

    req = urllib.request.Request(
        f"{base}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _get(base: str, token: str, path: str) -> dict:
    import json

    req = urllib.request.Request(f"{base}{path}", headers={"Authorization": f"Token {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _seed(base: str, token: str) -> dict:
    """Real objects of every kind the API addresses by id."""
    task = _post(base, token, "/api/tasks/", {"title": "Fuzz target", "assigneeId": "ada", "reviewerId": "grace"})
    req = _post(base, token, "/api/requirements/", {"title": "Fuzz requirement"})
    stream = _post(base, token, "/api/agentbus/streams", {"sender": "ada", "recipient": "grace"})
    # A task reviewed by the admin: submitting it creates an approval and a notification.
    me = _get(base, token, "/api/agents/ada/")["ownerId"]
    reviewed = _post(base, token, "/api/tasks/", {"title": "Review me", "assigneeId": "linus", "reviewerUserId": me})
    _post(base, token, f"/api/tasks/{reviewed['id']}/transition", {"status": "review"})
    approval = _get(base, token, "/api/approvals?status=pending")
    notes = _get(base, token, "/api/notifications")
    chat = _post(base, token, "/api/agents/ada/chat", {"text": "hello"})
    # The chat may answer "pending" (its timeout is short; the demo agent's first chat also
    # lists its git tool server): its activity is waited for.
    deadline = time.monotonic() + 30
    while True:
        history = _get(base, token, "/api/agents/ada/mailbox")["history"]
        done = [h for h in history if h["id"] == chat["mailboxItemId"] and h.get("activity")]
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    activity = done[0]["activity"]["id"]
    approvals = approval["approvals"] if isinstance(approval, dict) else approval
    return {
        "agent_id": "ada",
        "task_id": task["id"],
        "requirement_id": req["id"],
        "stream_id": stream["streamId"],
        "approval_id": approvals[0]["id"],
        "notification_id": notes["notifications"][0]["id"],
        "activityId": activity,
    }


@pytest.fixture
def server_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The fuzzed server's database: a SQLite file, or a new PostgreSQL database beside
    the test pass's (a missing server fails, never skips)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fuzz.sqlite3'}"
        return
    from tests.faults.harness import PgServer, pg_base_url

    base = pg_base_url()
    if base is None:
        pytest.fail("the PostgreSQL fuzz needs MARKUS_TEST_PG_URL")
    pg, name = PgServer(base), f"fuzz_{os.getpid()}"
    url = pg.create(name)
    try:
        yield url
    finally:
        pg.drop(name)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    # PostgreSQL too: there one fuzzing client once ran the server out of connections (a
    # request's kept beside the embedded worker), every door answering 503.
    "server_database",
    ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
    indirect=True,
)
def test_schemathesis_finds_no_server_error_nor_an_undocumented_answer_on_a_running_server(tmp_path, server_database):
    port = _free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "markus.settings",
        "MARKUS_DATA_DIR": str(tmp_path),
        "MARKUS_CHAT_TIMEOUT_S": "0.5",
        "DATABASE_URL": server_database,
    }
    env.pop("REDIS_URL", None)  # the embedded worker and beat, in the server's process
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT)
    subprocess.run([*manage, "demo"], env=env, check=True, cwd=ROOT, capture_output=True)
    token = subprocess.run(
        [*manage, "drf_create_token", "admin"], env=env, check=True, cwd=ROOT, capture_output=True, text=True
    ).stdout.split()[2]
    server = subprocess.Popen(
        [*manage, "up", "--port", str(port)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/schema/", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.3)
        # Real ids, so operations reach their logic instead of answering 404.
        ids = _seed(base, token)
        # An internal agent's bus inbox is consumed by its mailbox, so a wait on it parks for
        # its whole timeout: the fuzzer's waits answer at once.
        ids["timeout_seconds"] = "0"
        (tmp_path / "schemathesis.toml").write_text(
            "[parameters]\n" + "".join(f'{name} = "{value}"\n' for name, value in ids.items())
        )
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "schemathesis.cli",
                "run",
                f"{base}/api/schema/",
                "--checks",
                # No 5xx, and every answer as documented: its status, content type, body and headers.
                "not_a_server_error,status_code_conformance,content_type_conformance,"
                "response_schema_conformance,response_headers_conformance",
                "-n",
                "12",
                "--phases",
                "examples,coverage,fuzzing",
                "--request-timeout",
                "20",
                "-H",
                f"Authorization: Token {token}",
                "--suppress-health-check",
                "all",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )
        report = run.stdout[-6000:] + run.stderr[-2000:]
        assert run.returncode == 0, report
        assert "Coverage" in run.stdout and "Fuzzing" in run.stdout
        assert "38 passed" in run.stdout or " passed" in run.stdout.split("Fuzzing", 1)[1][:200]
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
