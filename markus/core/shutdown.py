"""Whether this process's Celery worker is shutting down, and how ``manage.py up`` tells
its embedded worker to. Celery's own flags (``celery.worker.state``) say it: a worker's
warm shutdown (SIGTERM) sets ``should_stop``, a cold one ``should_terminate``; the
embedded worker gets no signal of its own (daphne takes them), so ``up`` sets the flag
when daphne returns. The attention loop reads it at its safe points (between items, and
by the cancel watch of a model call in flight): a stopping worker lets go of its work,
the item back in the queue with its session, instead of running on for minutes. A call
that cannot be closed (a model that has not sent its first byte: the SDK holds no socket
to close yet) is not waited for past ``MARKUS_SHUTDOWN_GRACE_S``: ``up`` then ends the
process (``markus.management.commands.up``)."""

from __future__ import annotations

from celery.worker import state


def worker_stopping() -> bool:
    """True once this process's worker was asked to stop (Celery's own test of its
    flags, ``state.maybe_shutdown``: 0, the exit code, asks too)."""
    flags = (state.should_stop, state.should_terminate)
    return any(flag is not None and flag is not False for flag in flags)


def stop_worker() -> None:
    """Ask this process's worker to stop, as a warm shutdown does."""
    state.should_stop = 0


def in_flight() -> int:
    """How many tasks this process's worker is running."""
    return len(state.active_requests)
