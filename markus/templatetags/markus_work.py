"""``{% load markus_work %}``: ``task|reviewer``, who reviews a task as the state machine
decides it (``markus.work.selectors.task_reviewer``: the named reviewer, else whoever
filed it), so the page says what the review will do."""

from __future__ import annotations

from typing import Any

from django import template
from django.contrib.auth import get_user_model

from markus.agents.models import Agent
from markus.work.models import Task
from markus.work.selectors import task_reviewer

register = template.Library()


@register.filter
def reviewer(task: Task) -> dict[str, Any] | None:
    """``{name, named}``: the reviewer's name and whether the task names it (else it is
    who filed it); None when nobody reviews it."""
    found = task_reviewer(task)
    if found is None:
        return None
    kind, rid = found
    named = bool(task.reviewer_agent_id or task.reviewer_user_id)
    if kind == "agent":
        agent = Agent.objects.filter(id=rid).only("name").first()
        return {"name": agent.name if agent else rid, "named": named}
    user = get_user_model().objects.filter(pk=rid).first()
    return {"name": user.get_username() if user else "—", "named": named}
