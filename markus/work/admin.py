"""The operator console for tasks and requirements. Status is read-only in the forms:
it changes only through the actions, which call the transition services and report
illegal moves as messages."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.options import InlineModelAdmin
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from markus.console.modeladmin import ConsoleModelAdmin
from markus.core.actors import Actor
from markus.core.errors import MarkusError

from . import deletion, dependencies, services
from .history import history_of
from .models import Requirement, RequirementComment, RequirementState, StatusChange, Task, TaskComment, TaskState
from .requirement_services import RequirementStep

if TYPE_CHECKING:  # ModelAdmin is not subscriptable at run time
    TaskAction: TypeAlias = Callable[[admin.ModelAdmin[Task], HttpRequest, QuerySet[Task]], None]
    RequirementAction: TypeAlias = Callable[[admin.ModelAdmin[Requirement], HttpRequest, QuerySet[Requirement]], None]


def _run(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Task] | QuerySet[Requirement],
    label: str,
    step: Callable[[str, Actor], object],
) -> None:
    actor = Actor.for_user(request.user)
    done, failed = 0, []
    for obj in queryset:
        try:
            step(obj.id, actor)
            done += 1
        except MarkusError as exc:
            failed.append(f"{obj.id}: {exc}")
    if done:
        modeladmin.message_user(request, f"{label}: {done} done.", messages.SUCCESS)
    for failure in failed:
        modeladmin.message_user(request, f"{label} refused for {failure}", messages.ERROR)


def _delete(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    objs: Iterable[Task] | Iterable[Requirement],
    step: Callable[[str, Actor], None],
) -> None:
    """The console deletes through ``deletion``, which withdraws what waits on the
    object; one gone meanwhile is reported, not a 500."""
    actor = Actor.for_user(request.user)
    for obj in objs:
        try:
            step(obj.pk, actor)
        except MarkusError as exc:
            modeladmin.message_user(request, f"Delete refused for {obj.pk}: {exc}", messages.ERROR)


class ReadOnlyCommentInline(admin.TabularInline):
    """Comments are posted through the services (they notify agents), not the admin."""

    extra = 0
    can_delete = False
    fields = readonly_fields = ("created_at", "author_agent", "author_user", "content", "reply_to", "activity_id")

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def status_history(entity: str, entity_id: str) -> SafeString:
    """The status history of a task or requirement as a read-only table (oldest first)."""
    rows = format_html_join(
        "",
        "<tr><td>{}</td><td>{} → {}</td><td>{} {}</td><td>{}</td></tr>",
        (
            (
                c.at.strftime("%Y-%m-%d %H:%M:%S"),
                c.from_status or "filed",
                c.to_status,
                c.actor_kind,
                c.actor_name,
                c.note,
            )
            for c in history_of(entity, entity_id)
        ),
    )
    if not rows:
        return format_html("<p>{}</p>", "No changes recorded.")
    head = "<tr><th>when (UTC)</th><th>from → to</th><th>who</th><th>note or reason</th></tr>"
    return format_html('<table class="status-history">{}{}</table>', SafeString(head), rows)


@admin.register(StatusChange)
class StatusChangeAdmin(ConsoleModelAdmin):
    """Every transition of a task or requirement, as recorded in its transaction: read only."""

    list_display = ("at", "entity", "entity_id", "from_status", "to_status", "actor_kind", "actor_name", "note")
    list_filter = ("entity", "to_status", "actor_kind")
    search_fields = ("entity_id", "actor_name")
    date_hierarchy = "at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def task_action(to_status: str, label: str) -> TaskAction:
    def action(modeladmin: admin.ModelAdmin[Task], request: HttpRequest, queryset: QuerySet[Task]) -> None:
        _run(
            modeladmin,
            request,
            queryset,
            label,
            lambda task_id, actor: services.task_transition(task_id=task_id, to_status=to_status, actor=actor),
        )

    action.__name__ = f"task_to_{to_status}"
    return admin.action(description=label)(action)


@admin.action(description="Cancel with the tasks waiting on it (cascade)")
def task_cancel_cascade(modeladmin: admin.ModelAdmin[Task], request: HttpRequest, queryset: QuerySet[Task]) -> None:
    _run(
        modeladmin,
        request,
        queryset,
        "Cancel with dependents",
        lambda task_id, actor: services.task_transition(
            task_id=task_id, to_status=TaskState.CANCELLED, actor=actor, cascade=True
        ),
    )


@admin.action(description="Retry (fresh execution)")
def task_retry(modeladmin: admin.ModelAdmin[Task], request: HttpRequest, queryset: QuerySet[Task]) -> None:
    _run(
        modeladmin, request, queryset, "Retry", lambda task_id, actor: services.task_retry(task_id=task_id, actor=actor)
    )


def requirement_action(step: RequirementStep, label: str, name: str) -> RequirementAction:
    def action(
        modeladmin: admin.ModelAdmin[Requirement], request: HttpRequest, queryset: QuerySet[Requirement]
    ) -> None:
        _run(
            modeladmin,
            request,
            queryset,
            label,
            lambda requirement_id, actor: step(requirement_id=requirement_id, actor=actor),
        )

    action.__name__ = f"requirement_{name}"
    return admin.action(description=label)(action)


class TaskCommentInline(ReadOnlyCommentInline):
    model = TaskComment


TASK_ADD_FIELDS = (
    "title",
    "description",
    "assignee",
    "reviewer_agent",
    "reviewer_user",
    "requirement",
    "depends_on",
)


class TaskChangeForm(forms.ModelForm):
    """Edits keep the rules a form can break: the reviewer is not the assignee, and the
    dependencies change only as ``dependencies.task_set_dependencies`` allows (checked
    here, so a refusal, a cycle say, is shown on the field; ``TaskAdmin.save_related``
    makes the change through the service)."""

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("depends_on") is not None:
            try:
                dependencies.check_task_dependencies(self.instance, [t.pk for t in data["depends_on"]])
            except MarkusError as exc:
                self.add_error("depends_on", str(exc))
        assignee, reviewer = data.get("assignee"), data.get("reviewer_agent")
        if assignee is not None and reviewer is not None and assignee.pk == reviewer.pk:
            raise forms.ValidationError("the reviewer cannot be the assignee: a worker cannot complete its own task")
        if reviewer is not None and data.get("reviewer_user") is not None:
            raise forms.ValidationError("a task has one reviewer: an agent or a user, not both")
        return data


class TaskAddForm(forms.ModelForm):
    """ "Add task" files the task through ``services.task_create`` (team from the
    assignee, the signed-in user as creator, the lifecycle events, the start for its
    assignee); a refusal of the service is shown on the form. The service runs in
    ``clean`` (inside the admin's transaction) because that is the last point where
    an error can still go on the form; ``TaskAdmin.save_model`` then has nothing to
    save."""

    actor: Actor  # set by TaskAdmin.get_form from the request

    class Meta:
        model = Task
        fields = TASK_ADD_FIELDS

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data

        def pk(value: Model | None) -> Any:
            return value.pk if value is not None else None

        try:
            with transaction.atomic():
                task = services.task_create(
                    actor=self.actor,
                    title=data.get("title") or "",
                    description=data.get("description") or "",
                    assignee_id=pk(data.get("assignee")),
                    reviewer_agent_id=pk(data.get("reviewer_agent")),
                    reviewer_user_id=pk(data.get("reviewer_user")),
                    requirement_id=pk(data.get("requirement")),
                    depends_on=[t.pk for t in data.get("depends_on") or []],
                )
        except MarkusError as exc:
            raise forms.ValidationError(str(exc)) from exc
        self.instance = task
        return data


@admin.register(Task)
class TaskAdmin(ConsoleModelAdmin):
    list_display = ("title", "status", "assignee", "reviewer_agent", "execution_round", "updated_at", "id")
    list_filter = ("status",)
    search_fields = ("id", "title")
    list_select_related = ("assignee", "reviewer_agent")
    raw_id_fields = (
        "assignee",
        "reviewer_agent",
        "reviewer_user",
        "created_by_agent",
        "created_by_user",
        "requirement",
    )
    filter_horizontal = ("depends_on",)
    readonly_fields = (
        "status",
        "filing_approval",
        "execution_round",
        "cancel_requested_at",
        "completed_at",
        "created_at",
        "updated_at",
        "history",
    )
    inlines = [TaskCommentInline]
    form = TaskChangeForm
    actions = [
        task_action(TaskState.IN_PROGRESS, "Start (in progress)"),
        task_action(TaskState.REVIEW, "Submit for review"),
        task_action(TaskState.COMPLETED, "Complete"),
        task_action(TaskState.BLOCKED, "Block"),
        task_action(TaskState.FAILED, "Mark failed"),
        task_action(TaskState.REJECTED, "Reject"),
        task_action(TaskState.CANCELLED, "Cancel"),
        task_cancel_cascade,
        task_action(TaskState.ARCHIVED, "Archive"),
        task_retry,
    ]

    @admin.display(description="status history")
    def history(self, obj: Task) -> SafeString:
        return status_history(StatusChange.Entity.TASK, obj.id)

    def get_fields(self, request: HttpRequest, obj: Task | None = None) -> list[Any]:
        return list(TASK_ADD_FIELDS) if obj is None else super().get_fields(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Task | None = None) -> list[str]:
        return [] if obj is None else super().get_readonly_fields(request, obj)

    def get_inlines(self, request: HttpRequest, obj: Task | None) -> list[type[InlineModelAdmin[Any, Any]]]:
        return [] if obj is None else list(super().get_inlines(request, obj))

    def get_form(
        self, request: HttpRequest, obj: Task | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm[Task]]:
        if obj is not None:
            return super().get_form(request, obj, change=change, **kwargs)
        kwargs["form"] = TaskAddForm
        form = super().get_form(request, obj, change=change, **kwargs)
        return type("TaskAddForm", (form,), {"actor": Actor.for_user(request.user)})

    def save_model(self, request: HttpRequest, obj: Task, form: forms.ModelForm[Task], change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
        # On add, TaskAddForm.clean filed the task through the service.

    def save_related(self, request: HttpRequest, form: forms.ModelForm[Task], formsets: Any, change: bool) -> None:
        """On change, ``depends_on`` is set by the service (history row, re-check), not
        saved as a plain many-to-many field; the task's other fields are saved by then."""
        if not change:
            return
        chosen = form.cleaned_data.pop("depends_on", None)
        super().save_related(request, form, formsets, change)
        if chosen is None:
            return
        try:
            dependencies.task_set_dependencies(
                task_id=form.instance.pk, depends_on=[t.pk for t in chosen], actor=Actor.for_user(request.user)
            )
        except MarkusError as exc:  # changed meanwhile: checked again under the row lock
            self.message_user(request, f"Dependencies not changed: {exc}", messages.ERROR)

    def delete_model(self, request: HttpRequest, obj: Task) -> None:
        _delete(self, request, [obj], lambda pk, actor: deletion.task_delete(task_id=pk, actor=actor))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        _delete(self, request, queryset, lambda pk, actor: deletion.task_delete(task_id=pk, actor=actor))


class RequirementCommentInline(ReadOnlyCommentInline):
    model = RequirementComment


@admin.register(Requirement)
class RequirementAdmin(ConsoleModelAdmin):
    list_display = ("title", "status", "created_by_agent", "created_by_user", "updated_at", "id")
    list_filter = ("status",)
    search_fields = ("id", "title")
    list_select_related = ("created_by_agent", "created_by_user")
    raw_id_fields = ("created_by_agent", "created_by_user", "team")
    readonly_fields = ("status", "rejected_reason", "created_at", "updated_at", "history")
    inlines = [RequirementCommentInline]
    actions = [
        requirement_action(services.requirement_approve, "Approve", RequirementState.IN_PROGRESS),
        requirement_action(services.requirement_reject, "Reject", RequirementState.REJECTED),
        requirement_action(services.requirement_complete, "Complete", RequirementState.COMPLETED),
        requirement_action(services.requirement_cancel, "Cancel", RequirementState.CANCELLED),
    ]

    @admin.display(description="status history")
    def history(self, obj: Requirement) -> SafeString:
        return status_history(StatusChange.Entity.REQUIREMENT, obj.id)

    def delete_model(self, request: HttpRequest, obj: Requirement) -> None:
        _delete(self, request, [obj], lambda pk, actor: deletion.requirement_delete(requirement_id=pk, actor=actor))

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Requirement]) -> None:
        _delete(self, request, queryset, lambda pk, actor: deletion.requirement_delete(requirement_id=pk, actor=actor))
