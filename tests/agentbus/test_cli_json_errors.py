"""The CLI as the README spells it: ``agentbus request SENDER AGENT "…"`` (the text as the
payload, ``{"text": "…"}``; ``--payload JSON`` still works), and every error, whatever
its cause (a refusal, a hub's answer, bad arguments), on stderr as one JSON object with
``error`` and ``code``, a non-zero exit and nothing on stdout. Successes are unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.db import connection

from .hub_server import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]

RUNNER = """
import sys
from django.conf import settings
settings.DATABASES["default"]["NAME"] = sys.argv[1]
import django
django.setup()
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", *sys.argv[2:]])
"""


def shell(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", RUNNER, connection.settings_dict["NAME"], *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "markus.settings.test"},
    )


def failed(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode != 0, run.stdout
    assert run.stdout == ""
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    error = json.loads(lines[0])
    assert isinstance(error, dict) and error["error"] and error["code"], error
    return error


def test_request_takes_the_text_as_its_payload(cli, eve, ada):
    result = cli("agentbus", "request", "eve", "ada", "is main green?", "--timeout-seconds", "0", token=eve.token)
    assert result["request"]["payload"] == {"text": "is main green?"}
    assert result["timed_out"] is True


def test_request_still_takes_a_json_payload(cli, eve, ada):
    result = cli(
        "agentbus",
        "request",
        "eve",
        "ada",
        "--payload",
        '{"text": "hi", "n": 1}',
        "--timeout-seconds",
        "0",
        token=eve.token,
    )
    assert result["request"]["payload"] == {"text": "hi", "n": 1}


def test_request_needs_the_text_or_a_payload_not_both(cli, eve, ada):
    assert "text" in cli.fails("agentbus", "request", "eve", "ada", token=eve.token)
    assert "not both" in cli.fails("agentbus", "request", "eve", "ada", "hi", "--payload", "{}", token=eve.token)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("agentbus", "close", "no-such-stream", "eve"), "not_found"),
        (("agentbus", "pending", "ghost"), "not_found"),
        (("agentbus", "append", "s", "eve", "--payload", "{nope"), "invalid"),
        (("agentbus", "append", "s", "eve"), "usage"),  # --payload missing
        (("agentbus", "wait", "eve", "--limit", "0"), "usage"),
        (("agentbus", "request", "eve", "ada"), "usage"),
        (("agentbus",), "usage"),
        (("agent", "show", "ghost"), "not_found"),
        (("task", "show", "tsk_missing"), "not_found"),
    ],
)
def test_every_local_error_is_one_json_object_on_stderr(eve, ada, args, code):
    error = failed(shell(*args))
    assert error["code"] == code, error


def test_a_hub_refusal_carries_the_hubs_status_code_and_detail(hub, eve, max_):
    error = failed(shell("agentbus", "drain", "max", "--hub", hub.url, "--token", eve.token))
    assert error["status"] == 404 and error["code"] == "not_found" and error["detail"]
    error = failed(shell("agentbus", "pending", "eve", "--hub", hub.url, "--token", "mk_wrong"))
    assert error["status"] == 401
    error = failed(shell("agentbus", "pending", "eve", "--hub", "http://127.0.0.1:1", "--token", eve.token))
    assert error["code"] == "unreachable"
    error = failed(shell("agentbus", "pending", "eve", "--hub", hub.url))
    assert error["code"] == "usage" and "token" in error["error"]


def test_a_success_is_unchanged(eve, ada):
    run = shell("agentbus", "pending", "eve")
    assert run.returncode == 0 and run.stderr == ""
    assert json.loads(run.stdout) == {"agentId": "eve", "pending": 0}
