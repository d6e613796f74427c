"""One Celery worker for a benchmark: a thread of the embedded runtime on the default
(no ``REDIS_URL``), else a ``celery worker -c 1`` process of its own on the broker."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from celery import Celery
from django.conf import settings

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


def start_worker(stdout: SupportsWrite[str], *, app: Celery, module: str, name: str) -> Callable[[], None]:
    """Start one worker of ``app`` (``module`` names it for ``celery -A``; ``name`` the
    worker); returns how to stop it. The worker runs the offline brain."""
    if not settings.REDIS_URL:
        from markus.embedded import start_worker_thread

        worker, _thread = start_worker_thread(app, concurrency=1)
        return lambda: worker.stop(in_sighandler=False)
    env = {**os.environ, "MARKUS_LLM_PROVIDER": "offline"}
    command = [sys.executable, "-m", "celery", "-A", module, "worker", "-c", "1", "-P", "threads"]
    command += ["--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "WARNING"]
    command += ["-n", f"{name}-{os.getpid()}@%h"]
    stdout.write(f"  starting `celery -A {module} worker -c 1` (REDIS_URL is set)\n")
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop() -> None:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    return stop
