"""Celery entry points. The step is a plain function (``outbox_relay``); the sweep
(``attention.sweep``) or beat calls this as the backstop for rows the after-commit
relay did not publish."""

from __future__ import annotations

from celery import shared_task

from .outbox import outbox_relay


@shared_task(name="agentbus.relay_outbox", ignore_result=True)
def relay_outbox() -> int:
    return len(outbox_relay().relayed)
