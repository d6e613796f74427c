"""The CLI exactly as CONTRACT.md spells it. Every test runs twice: on the local
database and in hub mode against a daphne hub over HTTP with a token (the seed's
outage was a hub mode that wrapped everything but the inbox)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection

from agentbus.models import Chunk, Stream

from .conftest import forged_topic, say
from .hub_server import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]


@pytest.fixture(autouse=True)
def long_poll(settings, monkeypatch):
    """A fallback poll far longer than any test waits: a quick answer is a wake-up."""
    monkeypatch.setitem(settings.MARKUS, "AGENTBUS_POLL_SECONDS", 30.0)


def texts(result) -> list[str]:
    return [m["payload"]["text"] for m in result["messages"]]


def in_thread(fn) -> tuple[threading.Thread, list]:
    errors: list[BaseException] = []

    def run():
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def test_open_append_close(cli, eve, max_):
    opened = cli("agentbus", "open", "eve", "max", "--stream-id", "correction-1", "--topic", "review", token=eve.token)
    assert opened["streamId"] == "correction-1" and opened["recipient"] == "max"
    chunk = cli(
        "agentbus", "append", "correction-1", "eve", "--payload", '{"text":"stop, wrong file"}', token=eve.token
    )
    assert set(chunk) == {"streamId", "sequence", "sender", "senderName", "senderTeam", "topic", "payload", "createdAt"}
    assert chunk["sequence"] == 1 and chunk["topic"] == "review" and chunk["sender"] == "eve"
    assert cli("agentbus", "close", "correction-1", "eve", token=eve.token)["closed"] is True
    assert "closed" in cli.fails("agentbus", "append", "correction-1", "eve", "--payload", "{}", token=eve.token)


def test_a_topic_or_stream_id_with_a_line_break_is_refused_naming_the_field(cli, eve, max_):
    assert "topic" in cli.fails("agentbus", "open", "eve", "max", "--topic", forged_topic("\n"), token=eve.token)
    assert "streamId" in cli.fails("agentbus", "open", "eve", "max", "--stream-id", "s1\n", token=eve.token)
    assert not Stream.objects.filter(sender_id="eve").exists()


def test_close_is_for_the_sender_only(cli, eve, max_):
    say(eve, max_, "hi", stream_id="s1")
    assert "sender" in cli.fails("agentbus", "close", "s1", "max", token=max_.token)


def test_a_timed_out_wait_is_a_success_with_a_cursor(cli, eve):
    out = cli("agentbus", "wait", "eve", "--timeout-seconds", "0.2", token=eve.token)
    assert out["timed_out"] is True and out["messages"] == [] and out["next_cursor"]


def test_wait_prints_what_arrived_and_resumes_after_the_cursor(cli, eve, max_):
    say(max_, eve, "one")
    first = cli("agentbus", "wait", "eve", "--timeout-seconds", "5", token=eve.token)
    assert texts(first) == ["one"] and first["timed_out"] is False
    say(max_, eve, "two")
    second = cli("agentbus", "wait", "eve", "--after-cursor", first["next_cursor"], token=eve.token)
    assert texts(second) == ["two"]
    third = cli(
        "agentbus", "wait", "eve", "--after-cursor", second["next_cursor"], "--timeout-seconds", "0.2", token=eve.token
    )
    assert third["timed_out"] is True and third["next_cursor"]


def test_wait_is_woken_by_an_append(cli, eve, max_):
    stream = cli("agentbus", "open", "max", "eve", token=max_.token)["streamId"]

    def append_later():
        time.sleep(0.5)
        cli("agentbus", "append", stream, "max", "--payload", '{"text":"correction"}', token=max_.token)

    thread, errors = in_thread(append_later)
    started = time.monotonic()
    out = cli("agentbus", "wait", "eve", "--timeout-seconds", "20", token=eve.token)
    elapsed = time.monotonic() - started
    thread.join(10)
    assert not errors
    assert texts(out) == ["correction"]
    assert 0.4 < elapsed < 5, elapsed  # the poll is 30 s: this was a wake-up


def test_pending_drain_and_peek(cli, eve, max_, ada):
    say(max_, eve, "one")
    say(ada, eve, "two")
    assert cli("agentbus", "pending", "eve", token=eve.token) == {"agentId": "eve", "pending": 2}
    assert texts(cli("agentbus", "drain", "eve", "--peek", token=eve.token)) == ["one", "two"]
    assert cli("agentbus", "pending", "eve", token=eve.token)["pending"] == 2
    drained = cli("agentbus", "drain", "eve", token=eve.token)
    assert texts(drained) == ["one", "two"] and drained["next_cursor"]
    assert cli("agentbus", "pending", "eve", token=eve.token)["pending"] == 0
    assert cli("agentbus", "drain", "eve", token=eve.token)["messages"] == []
    assert not Stream.objects.filter(closed_at__isnull=False).exists()  # draining closes nothing


def test_drain_and_wait_interleave_on_one_cursor(cli, eve, max_):
    say(max_, eve, "one")
    drained = cli("agentbus", "drain", "eve", token=eve.token)
    say(max_, eve, "two")
    waited = cli("agentbus", "wait", "eve", "--after-cursor", drained["next_cursor"], token=eve.token)
    assert texts(waited) == ["two"]
    say(max_, eve, "three")
    again = cli("agentbus", "wait", "eve", "--after-cursor", waited["next_cursor"], token=eve.token)
    assert texts(again) == ["three"]
    # That wait acknowledged the cursor it was given (after "two"), not what it printed.
    assert texts(cli("agentbus", "drain", "eve", token=eve.token)) == ["three"]


def test_request_waits_for_the_reply_and_its_close(cli, eve, max_):
    def responder():
        incoming = cli("agentbus", "wait", "max", "--timeout-seconds", "10", token=max_.token)
        request = incoming["messages"][0]
        assert request["payload"] == {"text": "is main green?"}
        reply = cli("agentbus", "open", "max", "eve", "--reply-to", request["streamId"], token=max_.token)
        cli("agentbus", "append", reply["streamId"], "max", "--payload", '{"text":"yes"}', token=max_.token)
        time.sleep(0.3)  # the requester keeps waiting until the reply is closed
        cli("agentbus", "close", reply["streamId"], "max", token=max_.token)

    thread, errors = in_thread(responder)
    started = time.monotonic()
    result = cli(
        "agentbus",
        "request",
        "eve",
        "max",
        "--payload",
        '{"text":"is main green?"}',
        "--timeout-seconds",
        "20",
        token=eve.token,
    )
    thread.join(15)
    assert not errors
    assert result["timed_out"] is False and time.monotonic() - started < 10
    assert [r["payload"]["text"] for r in result["reply"]] == ["yes"]
    assert result["request"]["payload"] == {"text": "is main green?"}
    assert Stream.objects.get(id=result["streamId"]).closed_at is not None
    assert Stream.objects.get(id=result["replyStreamId"]).reply_to == result["streamId"]


def test_a_request_without_an_answer_times_out_successfully(cli, eve, max_):
    result = cli(
        "agentbus",
        "request",
        "eve",
        "max",
        "--payload",
        '{"text":"anyone?"}',
        "--timeout-seconds",
        "0.3",
        token=eve.token,
    )
    assert result["timed_out"] is True and result["reply"] == []
    assert Stream.objects.get(id=result["streamId"]).closed_at is not None


def test_append_and_request_sent_again_with_their_key_are_sent_once(cli, eve, max_):
    """A command run again after its answer was lost (the hub unreachable mid-answer)."""
    opened = cli("agentbus", "open", "eve", "max", token=eve.token)["streamId"]
    append = ("agentbus", "append", opened, "eve", "--payload", '{"text":"once"}', "--idempotency-key", "a-1")
    first, again = cli(*append, token=eve.token), cli(*append, token=eve.token)
    assert again == first and Chunk.objects.filter(stream_id=opened).count() == 1
    request = ("agentbus", "request", "eve", "max", "anyone?", "--timeout-seconds", "0", "--idempotency-key", "r-1")
    asked, asked_again = cli(*request, token=eve.token), cli(*request, token=eve.token)
    assert asked_again["streamId"] == asked["streamId"] and asked_again["request"] == asked["request"]
    assert Chunk.objects.filter(sender=eve.agent).count() == 2
    assert "1 to 200 visible ASCII characters" in cli.fails(*append[:-1], "has a space", token=eve.token)


def test_agent_show_and_list_carry_the_pending_inbox(cli, alice_token, eve, max_, ada):
    say(max_, eve, "one")
    say(ada, eve, "two")
    shown = cli("agent", "show", "eve", token=alice_token)
    assert shown["id"] == "eve" and shown["pending_inbox"] == 2 and "pendingInbox" not in shown
    rows = {r["id"]: r for r in cli("agent", "list", "--inbox", token=alice_token)["agents"]}
    assert rows["eve"]["pending_inbox_count"] == 2 and rows["ada"]["pending_inbox_count"] == 0
    assert all("pending_inbox_count" not in r for r in cli("agent", "list", token=alice_token)["agents"])


def test_errors_are_one_line_and_name_the_problem(cli, eve):
    assert "no such agent" in cli.fails("agentbus", "pending", "ghost", token=eve.token).lower()
    assert "--payload" in cli.fails("agentbus", "append", "s", "eve", "--payload", "{nope", token=eve.token)
    assert "object" in cli.fails("agentbus", "append", "s", "eve", "--payload", "[1]", token=eve.token)
    for message in (cli.fails("agentbus", "close", "nope", "eve", token=eve.token),):
        assert "\n" not in message and "stream" in message.lower()


def test_hub_mode_keeps_the_inbox_self_only(hub, eve, max_):
    from .conftest import Cli

    remote = Cli("hub", hub.url)
    say(max_, eve, "for eve")
    assert "404" in remote.fails("agentbus", "wait", "eve", "--timeout-seconds", "0", token=max_.token)
    assert "404" in remote.fails("agentbus", "drain", "eve", token=max_.token)
    assert "401" in remote.fails("agentbus", "pending", "eve", token="mk_wrong")


def test_hub_mode_needs_a_token_and_a_reachable_hub(eve):
    from .conftest import Cli
    from .hub_server import free_port

    assert "token" in Cli("hub", "http://127.0.0.1:1").fails("agentbus", "pending", "eve", token=None)
    unreachable = Cli("hub", f"http://127.0.0.1:{free_port()}")
    assert "cannot reach" in unreachable.fails("agentbus", "pending", "eve", token=eve.token)
    assert "hub URL" in Cli("hub", "ftp://x").fails("agentbus", "pending", "eve", token=eve.token)


def test_the_environment_selects_hub_mode(hub, eve, max_, monkeypatch):
    from .conftest import Cli

    say(max_, eve, "one")
    monkeypatch.setenv("MARKUS_HUB_URL", hub.url)
    monkeypatch.setenv("MARKUS_TOKEN", eve.token)
    assert Cli("local")("agentbus", "pending", "eve") == {"agentId": "eve", "pending": 1}
    monkeypatch.setenv("MARKUS_TOKEN", max_.token)  # now it is max asking about eve: refused by the hub
    assert "404" in Cli("local").fails("agentbus", "pending", "eve")


RUNNER = """
import sys
from django.conf import settings
settings.DATABASES["default"]["NAME"] = sys.argv[1]
import django
django.setup()
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", *sys.argv[2:]])
"""


@pytest.mark.parametrize("mode", ["local", "hub"])
def test_exit_codes_stdout_and_stderr_as_a_shell_sees_them(request, mode, eve, max_):
    extra = []
    if mode == "hub":
        extra = ["--hub", request.getfixturevalue("hub").url, "--token", eve.token]

    def run(*args):
        return subprocess.run(
            [sys.executable, "-c", RUNNER, connection.settings_dict["NAME"], *args, *extra],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={**__import__("os").environ, "DJANGO_SETTINGS_MODULE": "markus.settings.test"},
        )

    ok = run("agentbus", "wait", "eve", "--timeout-seconds", "0")
    assert ok.returncode == 0, ok.stderr
    assert len(ok.stdout.strip().splitlines()) == 1 and json.loads(ok.stdout)["timed_out"] is True
    bad = run("agentbus", "close", "no-such-stream", "eve")
    assert bad.returncode != 0 and ok.stderr == ""
    assert len(bad.stderr.strip().splitlines()) == 1 and "stream" in bad.stderr.lower()
    assert bad.stdout == ""


def test_task_show_carries_the_owners_pending_inbox(cli, alice, alice_token, eve, max_):
    from markus.core.actors import Actor
    from markus.work.services import task_create

    task = task_create(actor=Actor.for_user(alice), title="Answer eve", assignee_id="eve", start=False)
    say(max_, eve, "are you on it?")
    shown = cli("task", "show", task.id, token=alice_token)
    # The filing itself reached eve's inbox too (task lifecycle on the bus, and the
    # assignment notice of its mailbox: attention.outside).
    assert shown["id"] == task.id and shown["pending_inbox"] == 3 and "pendingInbox" not in shown
    assert "no such task" in cli.fails("task", "show", "tsk_missing", token=alice_token).lower() or "404" in cli.fails(
        "task", "show", "tsk_missing", token=alice_token
    )
