"""The console keeps the task rules (issue 35, point 6): a task's dependencies change
through the same service as everywhere else (cycles refused and named on the form, the
task re-checked, a history row), and deleting a task or a requirement withdraws the
queued mailbox items about it."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.core.actors import Actor
from markus.work.models import Requirement, StatusChange, Task, TaskState
from markus.work.services import requirement_create, task_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def file_task(alice, agent):
    """A task Alice files for Ada (not started unless its dependencies let it)."""

    def file(title: str, *, depends_on: tuple[str, ...] = (), start: bool = False) -> Task:
        return task_create(
            actor=Actor.for_user(alice), title=title, assignee_id=agent.id, depends_on=depends_on, start=start
        )

    return file


def change_url(task: Task) -> str:
    return reverse("admin:work_task_change", args=[quote(task.id)])


def save_dependencies(client, task: Task, depends_on: list[str]):
    """Post the task's change form as the console shows it, with ``depends_on`` changed."""
    form = client.get(change_url(task)).context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data.update(depends_on=depends_on, **{"comments-TOTAL_FORMS": 0, "comments-INITIAL_FORMS": 0})
    return client.post(change_url(task), data)


def form_errors(response) -> str:
    return str(response.context["adminform"].form.errors)


def task_history(task: Task) -> list[tuple[str, str, str]]:
    rows = StatusChange.objects.filter(entity="task", entity_id=task.id).order_by("at", "id")
    return [(r.from_status, r.to_status, r.note) for r in rows]


def open_items(agent_id: str, **about) -> list[MailboxItem]:
    lookup = {f"payload__{key}": value for key, value in about.items()}
    return list(MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED, **lookup))


def test_clearing_the_dependencies_of_a_waiting_task_starts_it_with_a_history_row(operator, file_task, agent):
    first = file_task("First")
    second = file_task("Second", depends_on=(first.id,), start=True)
    assert second.status == TaskState.PENDING

    response = save_dependencies(operator, second, [])

    assert response.status_code == 302, form_errors(response)
    second.refresh_from_db()
    assert second.status == TaskState.IN_PROGRESS
    assert list(second.depends_on.all()) == []
    assert [i for i in open_items(agent.id, taskId=second.id) if i.triggers_execution]
    history = task_history(second)
    assert (TaskState.PENDING, TaskState.PENDING, f"dependencies: {first.id} → none") in history
    assert history[-1][:2] == (TaskState.PENDING, TaskState.IN_PROGRESS)


def test_changing_the_dependencies_of_a_task_that_still_waits_is_recorded_and_it_keeps_waiting(operator, file_task):
    first, other = file_task("First"), file_task("Other")
    second = file_task("Second", depends_on=(first.id,), start=True)

    response = save_dependencies(operator, second, [other.id])

    assert response.status_code == 302, form_errors(response)
    second.refresh_from_db()
    assert second.status == TaskState.PENDING
    assert [t.id for t in second.depends_on.all()] == [other.id]
    assert task_history(second)[-1] == (TaskState.PENDING, TaskState.PENDING, f"dependencies: {first.id} → {other.id}")


def test_a_dependency_cycle_is_refused_on_the_form_naming_the_cycle(operator, file_task):
    first = file_task("First")
    second = file_task("Second", depends_on=(first.id,))
    third = file_task("Third", depends_on=(second.id,))

    response = save_dependencies(operator, first, [third.id])

    assert response.status_code == 200
    assert f"{first.id} → {third.id} → {second.id} → {first.id}" in form_errors(response)
    assert list(first.depends_on.all()) == []


def test_a_task_depending_on_itself_is_refused_on_the_form(operator, file_task):
    task = file_task("Alone")

    response = save_dependencies(operator, task, [task.id])

    assert response.status_code == 200
    assert f"{task.id} → {task.id}" in form_errors(response)
    assert list(task.depends_on.all()) == []


def test_the_dependencies_of_a_task_that_no_longer_waits_are_refused_on_the_form(operator, file_task):
    other = file_task("Other")
    running = file_task("Running", start=True)
    assert running.status == TaskState.IN_PROGRESS

    response = save_dependencies(operator, running, [other.id])

    assert response.status_code == 200
    assert "only while it waits" in form_errors(response)
    assert list(running.depends_on.all()) == []


def test_saving_a_task_with_its_dependencies_unchanged_records_nothing(operator, file_task):
    first = file_task("First")
    second = file_task("Second", depends_on=(first.id,), start=True)
    before = task_history(second)

    response = save_dependencies(operator, second, [first.id])

    assert response.status_code == 302, form_errors(response)
    assert task_history(second) == before


def test_deleting_a_requirement_withdraws_its_queued_item(operator, alice, agent):
    requirement = requirement_create(actor=Actor.for_user(alice), title="Launch", agent_id=agent.id)
    [item] = open_items(agent.id, requirementId=requirement.id)

    url = reverse("admin:work_requirement_delete", args=[quote(requirement.id)])
    response = operator.post(url, {"post": "yes"})

    assert response.status_code == 302
    assert not Requirement.objects.filter(id=requirement.id).exists()
    item.refresh_from_db()
    assert item.status == Status.DROPPED
    assert requirement.id in item.drop_reason


def test_deleting_a_task_withdraws_its_queued_items(operator, file_task, agent):
    task = file_task("Doomed", start=True)
    [execution] = open_items(agent.id, taskId=task.id)

    response = operator.post(reverse("admin:work_task_delete", args=[quote(task.id)]), {"post": "yes"})

    assert response.status_code == 302
    assert not Task.objects.filter(id=task.id).exists()
    execution.refresh_from_db()
    assert execution.status == Status.DROPPED
    assert task.id in execution.drop_reason


def test_deleting_tasks_from_the_list_withdraws_their_queued_items(operator, file_task, agent):
    tasks = [file_task("One", start=True), file_task("Two", start=True)]
    response = operator.post(
        reverse("admin:work_task_changelist"),
        {"action": "delete_selected", "_selected_action": [t.id for t in tasks], "post": "yes"},
    )

    assert response.status_code == 302
    assert not Task.objects.filter(id__in=[t.id for t in tasks]).exists()
    left = MailboxItem.objects.filter(agent_id=agent.id, source_type=MailboxType.TASK_STATUS_UPDATE)
    assert {i.status for i in left} == {Status.DROPPED}


def test_deleting_a_task_starts_the_task_that_waited_only_on_it(operator, file_task):
    first = file_task("First")
    second = file_task("Second", depends_on=(first.id,), start=True)

    response = operator.post(reverse("admin:work_task_delete", args=[quote(first.id)]), {"post": "yes"})

    assert response.status_code == 302
    second.refresh_from_db()
    assert second.status == TaskState.IN_PROGRESS
    assert (TaskState.PENDING, TaskState.PENDING, f"dependencies: {first.id} → none") in task_history(second)
