"""A worker told to stop (``manage.py up`` given SIGTERM or Ctrl-C, a ``celery worker``
its warm shutdown) lets go of its work at the next safe point: a model call in flight is
closed, its item goes back to the queue with its session (nothing was decided, so
nothing is lost), and the run takes no further item. A call that cannot be closed yet
(the model has not sent its first byte: the SDK holds no socket) is not waited for past
``MARKUS_SHUTDOWN_GRACE_S``: the process ends, and the next start recovers the item.
Before, the embedded worker's run went on after the server had stopped: a ``manage.py
up`` stopped mid-call with the real small model was still calling it 30 minutes later,
taking new items, serving nobody."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.celery import app as celery_app
from tests.api.up_server import UpServer
from tests.llm.misbehaving_model import MisbehavingModel, answer, delay_first_byte, stall

from .conftest import wait_for, worker_process

# How long the process may take to end once told (a bound on the wait, not a timing).
EXIT_WITHIN_S = 30
PATIENCE_S = 60


def on_the_model(model: MisbehavingModel) -> dict[str, str]:
    """A process's settings for the misbehaving model, with no triage nor judge calls."""
    return {
        "MARKUS_LLM_PROVIDER": "openai",
        "MARKUS_LLM_BASE_URL": model.url,
        "MARKUS_LLM_API_KEY": "sk-test",
        "MARKUS_LLM_MODEL": "slow",
        "MARKUS_TRIAGE": "false",
        "MARKUS_INTERRUPT_JUDGE": "false",
    }


def serve(tmp_path: Path, model: MisbehavingModel) -> UpServer:
    up = UpServer(tmp_path)
    up.env |= on_the_model(model) | {"MARKUS_CHAT_TIMEOUT_S": "1", "MARKUS_SHUTDOWN_GRACE_S": "3"}
    return up.start()


def status_of(up: UpServer, item_id: str) -> str:
    said = up.manage(
        "shell", "-c", f"from mailbox.models import MailboxItem as M; print(M.objects.get(id={item_id!r}).status)"
    )
    return said.split()[-1]


def stop(up: UpServer) -> None:
    assert up.process is not None
    up.process.terminate()
    try:
        up.process.wait(EXIT_WITHIN_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"manage.py up still running {EXIT_WITHIN_S}s after SIGTERM:\n{up.output()}") from None


@pytest.mark.parametrize(
    "slow, left",
    [
        (stall(after_chunks=2, seconds=600), "queued"),  # the stream begun: closed, the item requeued at once
        (delay_first_byte(600), "processing"),  # no socket to close: the process ends at the grace
    ],
    ids=["mid-answer", "before its first byte"],
)
def test_manage_py_up_stopped_mid_call_ends_and_its_item_is_taken_up_at_the_next_start(tmp_path: Path, slow, left):
    with MisbehavingModel([slow, answer("The last commit teaches the parser about tabs.")]) as model:
        up = serve(tmp_path, model)
        try:
            up.manage("demo")
            token = up.manage("drf_create_token", "admin").split()[2]
            request = urllib.request.Request(
                f"{up.url}/api/agents/ada/chat",
                data=json.dumps({"text": "What changed in the last commit?"}).encode(),
                headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                item_id = json.load(response)["mailboxItemId"]
            wait_for(lambda: model.calls >= 1, PATIENCE_S, message="the item's model call")
            time.sleep(0.3)  # the stream's first chunks, where it has them
            stop(up)
        finally:
            up.stop()
        assert model.calls == 1 and status_of(up, item_id) == left
        # The next start takes it up: the lease's recovery, or the queue.
        again = serve(tmp_path, model)
        try:
            wait_for(
                lambda: status_of(again, item_id) == "completed", PATIENCE_S, 0.1, "the item answered after the restart"
            )
        finally:
            again.stop()
        assert model.calls == 2


@pytest.mark.redis
@pytest.mark.slow
def test_a_celery_worker_stopped_mid_call_lets_go_of_its_item_and_the_next_worker_answers_it(
    transactional_db, wake_on_enqueue, agent
):
    """A ``celery worker`` (as the README starts one) takes SIGTERM, its warm shutdown: the
    flag the loop reads is Celery's own, so the same holds as for ``manage.py up``. Without
    it a warm shutdown waits for the run: up to its budget of items, each with calls of
    minutes."""
    assert settings.REDIS_URL and connection.vendor == "postgresql", "this test needs PostgreSQL and Redis"
    db = connection.settings_dict
    with MisbehavingModel([stall(after_chunks=2, seconds=600), answer("Tabs, in the parser.")]) as model:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "markus.settings",
            "REDIS_URL": settings.REDIS_URL,
            "DATABASE_URL": f"postgres://{db['USER'] or ''}@{db['HOST'] or ''}/{db['NAME']}",
            **on_the_model(model),
        }
        celery_app.control.purge()
        worker = worker_process("stopping", env)
        try:
            item = mailbox_enqueue(
                agent_id=agent.id,
                source_type=MailboxType.HUMAN_CHAT,
                payload={"summary": "last commit", "content": "What changed in the last commit?"},
                metadata={"senderId": "1", "senderRole": "user"},
            )
            wait_for(lambda: model.calls >= 1, PATIENCE_S, message="the item's model call")
            time.sleep(0.3)  # the stream's first chunks
            worker.terminate()
            try:
                worker.wait(EXIT_WITHIN_S)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"the worker still ran {EXIT_WITHIN_S}s after SIGTERM") from None
        finally:
            worker.kill()
            worker.wait()
        item.refresh_from_db()
        assert (model.calls, item.status) == (1, Status.QUEUED)
        # The next worker answers it: the stopped run asked for another as it ended.
        again = worker_process("next", env)
        try:
            wait_for(
                lambda: MailboxItem.objects.get(id=item.id).status == Status.COMPLETED,
                PATIENCE_S,
                0.2,
                "the item answered by the next worker",
            )
        finally:
            again.terminate()
            again.wait(EXIT_WITHIN_S)
        assert model.calls == 2
