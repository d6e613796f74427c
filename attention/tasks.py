"""Celery tasks: thin wrappers over plain functions. The database is the queue; these
only carry wake-ups, so running one twice is harmless."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import close_old_connections, connection

from markus.core.db import SESSION_LOST
from markus.memory.dream import dream_check
from markus.reports import services as reports
from markus.work import dead_ends

from . import heartbeat, loop, selectors, services, stalls

log = logging.getLogger(__name__)


@shared_task(name=services.RUN_ATTENTION, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_attention(agent_id: str) -> str:
    close_old_connections()
    try:
        try:
            result = loop.run_attention(agent_id)
        except SESSION_LOST:
            # A kept connection is not health-checked before the task (markus.celery):
            # one the database cut meanwhile fails the run's first statement, the take,
            # which never reached it. Once more on a new connection; a run that got
            # further let its lease go or lost it, and a second run is harmless.
            if connection.is_usable():
                raise
            log.warning("attention: the connection of %s was cut; running once more on a new one", agent_id)
            connection.close()
            result = loop.run_attention(agent_id)
    finally:
        close_old_connections()
    if result.run_again_in is not None:
        services.wake(agent_id, countdown=result.run_again_in)
    return result.status


@shared_task(name="attention.sweep", ignore_result=True)
def sweep() -> int:
    close_old_connections()
    return services.sweep()


@shared_task(name="attention.heartbeat_all", ignore_result=True)
def heartbeat_all() -> int:
    """Every few minutes from beat: one heartbeat for each running agent whose own
    interval has come (attention.heartbeat); idempotent per agent and period."""
    return heartbeat.heartbeat_tick()


@shared_task(name="attention.daily_report_all", ignore_result=True)
def daily_report_all() -> int:
    """Every 15 minutes from beat: a daily-report item for each manager agent past the
    report hour in its time zone that has no report for its day (markus.reports)."""
    return reports.enqueue_due_reports(digest=selectors.day_activity)


@shared_task(name="attention.dream_cycle_all", ignore_result=True)
def dream_cycle_all() -> int:
    """Every 4 hours from beat: a dream (memory_consolidation item) for each agent with
    enough new observations, within the cluster's cap (markus.memory.dream)."""
    close_old_connections()
    return dream_check()


@shared_task(name="attention.stalls", ignore_result=True)
def notify_stalled() -> int:
    """Every minute from beat: each running agent's owner told of its stall, once per
    stall (attention.stalls)."""
    close_old_connections()
    return len(stalls.notify_stalls())


@shared_task(name="attention.dead_ends", ignore_result=True)
def dead_ends_all() -> int:
    """Every 10 minutes from beat: the waiting tasks that can never start marked (their
    creator told once), those that can again unmarked (markus.work.dead_ends)."""
    close_old_connections()
    return len(dead_ends.sweep())
