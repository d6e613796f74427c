"""Celery tasks: thin wrappers over plain functions. The database is the queue; these
only carry wake-ups, so running one twice is harmless."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import close_old_connections

from mailbox.registry import MailboxType

from . import loop, services

log = logging.getLogger(__name__)


@shared_task(name=services.RUN_ATTENTION, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_attention(agent_id: str) -> str:
    close_old_connections()
    try:
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
    return services.enqueue_periodic(MailboxType.HEARTBEAT)


@shared_task(name="attention.daily_report_all", ignore_result=True)
def daily_report_all() -> int:
    return services.enqueue_periodic(MailboxType.DAILY_REPORT)


@shared_task(name="attention.dream_cycle_all", ignore_result=True)
def dream_cycle_all() -> int:
    return services.enqueue_periodic(MailboxType.MEMORY_CONSOLIDATION)
