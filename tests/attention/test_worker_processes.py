"""Two real Celery worker processes on Redis and PostgreSQL hammered with enqueues for
one agent, one of them SIGSTOPped while it holds the lease, then resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest
from django.conf import settings
from django.db import connection

from attention import services
from attention.models import AgentAttention
from mailbox.models import MailboxItem

from .conftest import wait_for, worker_process
from .invariants import assert_single_focus
from .test_single_focus import _enqueue_many


@pytest.mark.redis
@pytest.mark.slow
def test_two_worker_processes_and_a_frozen_one_keep_one_focus_per_agent(transactional_db, wake_on_enqueue, agent):
    assert settings.REDIS_URL, "this test needs REDIS_URL (Redis broker shared by processes)"
    assert connection.vendor == "postgresql", "this test needs PostgreSQL (DATABASE_URL)"
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "markus.settings",
        "REDIS_URL": settings.REDIS_URL,
        "DATABASE_URL": f"postgres://{db['USER'] or ''}@{db['HOST'] or ''}/{db['NAME']}",
        "MARKUS_LEASE_SECONDS": "1.5",
        "MARKUS_COALESCE_WINDOW_MS": "0",
        "MARKUS_LLM_PROVIDER": "offline",
        # The SIGSTOP may land inside a transaction that holds the agent's attention row:
        # the database ends it after this long (production: a minute), then the other
        # worker can take the lease.
        "MARKUS_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS": "4000",
    }
    from markus.celery import app

    app.control.purge()
    workers = [worker_process("w1", env), worker_process("w2", env)]
    try:
        writers = [threading.Thread(target=_enqueue_many, args=(agent.id, 20, s)) for s in range(8)]
        for t in writers:
            t.start()
        # Freeze whichever process holds the lease, for well past the lease.
        owner = wait_for(
            lambda: (
                AgentAttention.objects.filter(agent=agent)
                .exclude(lease_owner="")
                .values_list("lease_owner", flat=True)
                .first()
            ),
            timeout=60,
            message="a lease holder",
        )
        pid = int(owner.split(":")[1])
        assert pid in {w.pid for w in workers}
        os.kill(pid, signal.SIGSTOP)
        time.sleep(2.0)
        services.sweep()  # the backstop kicks the agent; the other process takes over

        def taken_over() -> bool:
            owner = AgentAttention.objects.get(agent=agent).lease_owner
            if owner and owner.split(":")[1:2] != [str(pid)]:
                return True
            services.sweep()  # the beat's backstop, every poll here
            return False

        wait_for(taken_over, timeout=60, interval=0.5, message="the other worker took the lease")
        time.sleep(1.0)
        os.kill(pid, signal.SIGCONT)
        for t in writers:
            t.join()
        total = 8 * 20

        def settled():
            services.sweep()
            return MailboxItem.objects.filter(agent=agent, status__in=["completed", "dropped"]).count() == total

        wait_for(settled, timeout=180, interval=0.5, message="every item completed or dropped")
        counts = assert_single_focus(agent.id)
        assert counts["epochs"] >= 2
        assert set(counts["statuses"]) <= {"completed", "dropped"}
        dropped = MailboxItem.objects.filter(agent=agent, status="dropped")
        # Dropped only by recovery (the frozen worker's item) or by triage or deliberation
        # (a daily report superseded by a newer one), never silently.
        reasons = ("recovery", "triage", "deliberation")
        assert all(d.drop_reason.startswith(reasons) for d in dropped), [d.drop_reason for d in dropped]
    finally:
        for w in workers:
            try:
                os.kill(w.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            w.terminate()
        for w in workers:
            try:
                w.wait(timeout=20)
            except subprocess.TimeoutExpired:
                w.kill()
