"""Changing what a task waits on once it is filed (the console's door: the API and the
tools set a task's dependencies only as they file it, when no cycle can form).

The rules a change keeps: only a waiting task's (pending or blocked: once a task has
started, its dependencies have had their say), never a cycle (tasks waiting on each
other wait for good; the refusal names it), a history row for each change, and a task
whose dependencies are now all met starts, as when its last dependency completes."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from markus.core.actors import Actor

from . import dead_ends, history
from .errors import IllegalTransition, WorkError, WorkNotFound
from .models import StatusChange, Task
from .selectors import WAITING_STATES, dependency_cycle
from .services import check_dependency_ids, start_when_free


def _current(task: Task) -> list[str]:
    return sorted(task.depends_on.values_list("id", flat=True))


def check_task_dependencies(task: Task, depends_on: Iterable[str]) -> list[str]:
    """The ids ``task`` is to depend on, checked against the rules above (WorkError,
    IllegalTransition); saying again what it depends on now is always allowed."""
    ids = check_dependency_ids(depends_on)
    if sorted(ids) == _current(task):
        return ids
    if task.status not in WAITING_STATES:
        raise IllegalTransition(
            f"task {task.id} is {task.status}: its dependencies change only while it waits (pending or blocked)"
        )
    cycle = dependency_cycle(task.id, ids)
    if cycle:
        raise WorkError(f"dependsOn: task {task.id} would wait on itself, round {' → '.join(cycle)}")
    return ids


@transaction.atomic
def task_set_dependencies(*, task_id: str, depends_on: Iterable[str], actor: Actor) -> Task:
    """Make ``task_id`` depend on exactly ``depends_on``. The caller checks what the
    actor may see; no change, no history row."""
    task = Task.objects.select_for_update().filter(id=task_id).first()
    if task is None:
        raise WorkNotFound(f"no task {task_id!r}")
    ids = check_task_dependencies(task, depends_on)
    before = _current(task)
    if sorted(ids) != before:
        task.depends_on.set(ids)  # type: ignore[arg-type]  # django-stubs: pks are ints; Task ids are str
        _changed(task, before, sorted(ids), actor)
    return task


def release_dependents(task: Task, actor: Actor) -> None:
    """``task`` is being deleted: the tasks depending on it stop waiting on it (each
    with a history row) and start if nothing else holds them. Must be called holding
    SELECT FOR UPDATE on ``task``."""
    for dependent in Task.objects.select_for_update().filter(depends_on=task).order_by("created_at", "id"):
        before = _current(dependent)
        dependent.depends_on.remove(task)
        _changed(dependent, before, [d for d in before if d != task.id], actor)


def _changed(task: Task, before: list[str], after: list[str], actor: Actor) -> None:
    """The history row of a change (its status stays: from and to are the same), then
    the re-check its last dependency's completion would have made."""
    note = f"dependencies: {', '.join(before) or 'none'} → {', '.join(after) or 'none'}"
    history.record(StatusChange.Entity.TASK, task.id, task.status, task.status, actor, note)
    if not start_when_free(task, actor, note=f"its dependencies changed and are all met ({note})"):
        dead_ends.recheck(task, actor)  # a dead dependency dropped, or a new one added
