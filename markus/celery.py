"""The Celery app. The database is the queue; the broker only carries wake-ups."""

from __future__ import annotations

import os
import time
from typing import Any

from celery import Celery, current_task, signals
from django.conf import settings
from kombu.transport import redis as kombu_redis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "markus.settings")


class RedisChannel(kombu_redis.Channel):
    """kombu's Redis channel, made to survive the worker's recovery from a lost broker.

    When Redis goes away, celery's consumer first ``collect()``s the lost connection
    and then ``close()``s it. The channel's first close can stop half-way (a BRPOP in
    flight is read from the dead socket and raises), and ``collect()`` detaches the
    transport from the connection (``transport.client = None``). The second close then
    tries to restore the unacked messages (tasks still running, acks_late) through a new
    client, whose parameters kombu reads from the detached connection: AttributeError
    "'NoneType' object has no attribute 'hostname'". That is no connection error, so
    the consumer does not reconnect: the worker logs "Unrecoverable error" and stops
    consuming (and the late acks of the tasks in flight fail the same way).

    A channel whose connection has been closed cannot reach Redis any more: say so with
    the connection error the callers handle (the consumer reconnects, an ack is logged
    as "Couldn't ack"). Nothing is lost: the database is the queue; an unacked wake-up
    left in Redis comes back after the visibility timeout, and the beat sweep re-wakes
    every agent with due work anyway."""

    def _connparams(self, asynchronous: bool = False) -> dict[str, Any]:
        transport = self.connection
        if transport is None or transport.client is None:
            raise kombu_redis.redis.exceptions.ConnectionError("the broker connection of this channel is closed")
        params: dict[str, Any] = super()._connparams(asynchronous=asynchronous)
        return params


class RedisTransport(kombu_redis.Transport):
    """The Redis transport with ``RedisChannel`` (settings: CELERY_BROKER_TRANSPORT)."""

    Channel = RedisChannel


app = Celery("markus")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.worker_init.connect
def _keep_connections(**kwargs: Any) -> None:
    """A worker keeps its database connection between tasks for ``WORKER_CONN_MAX_AGE``
    seconds, unless the database's own CONN_MAX_AGE (``?conn_max_age=`` in DATABASE_URL)
    says otherwise. Not health-checked before reuse: Django's check is a ``SELECT 1``
    before each task's first statement, one more round trip on the way from a wake-up to
    the claim; a connection the database cut meanwhile fails the run's first statement
    (the lease's take, which then never reached it) and the task runs once more on a new
    one (``attention.tasks.run_attention``); a broken one is closed after the task.

    Every wake-up is a task. Measured (``bench wakeup``): a new PostgreSQL connection
    forks a server backend, the largest part of enqueue -> start; a new SQLite one
    (WAL set on open) took 3.7 ms of the embedded runtime's 10 ms budget. Celery's Django
    fixup closes every connection before and after each task whatever CONN_MAX_AGE says;
    with ``CELERY_DB_REUSE_MAX`` set it leaves that to ``_close_old_connections`` below,
    which is Django's own rule (a request's).

    Only the connections tasks open (``_kept_by_its_task``), not the process's setting:
    the embedded worker shares its process with the server, whose requests run each on a
    thread of its own that ends with the request (Django's ASGI handler). A connection
    such a thread kept was never used again and stayed open until the garbage collector
    freed it: one client's requests ran PostgreSQL out of connections."""
    from django.db.backends.signals import connection_created

    connection_created.connect(_kept_by_its_task, dispatch_uid="markus.celery.kept_by_its_task")


def _kept_by_its_task(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created``: a connection a task opened closes ``WORKER_CONN_MAX_AGE``
    seconds from now rather than at the task's end (Django's ``close_at``, which
    ``close_old_connections`` reads), unless the database sets its own age. Runs for every
    connection of the process (the server's requests too): nothing to import, one proxy read."""
    age = settings.WORKER_CONN_MAX_AGE
    if age and current_task and not connection.settings_dict.get("CONN_MAX_AGE"):
        connection.close_at = time.monotonic() + age


@signals.task_prerun.connect
@signals.task_postrun.connect
def _close_old_connections(task: Any = None, **kwargs: Any) -> None:
    """Around every task, as around a request: drop connections that are broken or past
    their CONN_MAX_AGE (0: all of them). Not in eager mode (a test's transaction)."""
    if task is not None and getattr(task.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()


@signals.worker_init.connect
@signals.worker_process_init.connect
def _traces(**kwargs: Any) -> None:
    """Traces in a worker process when OTEL_* asks for them (markus.telemetry): the
    worker's own (any pool) and each prefork child (which inherits its parent's)."""
    from markus import telemetry

    telemetry.setup()
