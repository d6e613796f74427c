"""The work pages that act: ``/work`` (tasks and requirements, filed from the page), a
task or a requirement (its transitions, comments with mentions and replies, status
history, the caller's pending approval on it), and ``/approvals/`` (the caller's
questions to answer).

Every write goes through the function the API's view calls (``file_task``,
``file_requirement``, ``task_transition``, the comment and requirement services,
``approval_respond``), under the same rules: what a caller may see or reference is
decided there. A form post that succeeds redirects (post/redirect/get); one that the
rules refuse renders the page again with the refusal and the status the API answers
(400, 403, 409), the form's input kept. CSRF: Django's middleware on every post."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from rest_framework import serializers

from markus.core.actors import Actor
from markus.core.errors import MarkusError
from markus.work import services
from markus.work.api import TaskCreateInput, file_task
from markus.work.history import history_of, history_row
from markus.work.models import Requirement, RequirementState, StatusChange, Task, TaskState
from markus.work.requirements_api import RequirementCreateInput, file_requirement
from markus.work.selectors import (
    access_requirement,
    access_task,
    agents_assignable_by,
    agents_visible_to,
    requirement_comments,
    requirements_visible_to,
    task_comments,
    tasks_visible_to,
    waiting_dependents_count,
)
from markus.work.states import REQUIREMENT_TRANSITIONS, TASK_TRANSITIONS
from notifications.models import Approval
from notifications.selectors import approvals_for
from notifications.services import approval_respond

from .listing import Cleaner, Ignored, Listed, Query, one_of, search_text

APPROVALS_SHOWN = 50
ANSWERED_SHOWN = 20  # answered approvals a page
CHOICE_ROWS = 200  # the most agents, tasks or requirements a form's select offers
NONE = "none"  # the assignee or requirement filter's value for tasks with none
# The requirement steps a page offers, by the state they lead to.
REQUIREMENT_STEPS = {
    RequirementState.IN_PROGRESS: "approve",
    RequirementState.REJECTED: "reject",
    RequirementState.COMPLETED: "complete",
    RequirementState.CANCELLED: "cancel",
}
STEP_FUNCTIONS = {
    "approve": services.requirement_approve,
    "reject": services.requirement_reject,
    "complete": services.requirement_complete,
    "cancel": services.requirement_cancel,
}


def _user(request: HttpRequest) -> User:
    user = request.user
    assert isinstance(user, User)  # behind login_required
    return user


def _actor(request: HttpRequest) -> Actor:
    return Actor.for_user(_user(request))


def _errors(serializer: serializers.Serializer) -> str:
    """A serializer's errors as one line a person reads: ``field: message; …``."""
    parts = []
    for field, messages in serializer.errors.items():
        text = " ".join(str(m) for m in (messages if isinstance(messages, list) else [messages]))
        parts.append(f"{field}: {text}")
    return "; ".join(parts)


# ---------------------------------------------------------------------------- reads


def _task_form_choices(actor: Actor) -> dict[str, Any]:
    return {
        "assignable": list(agents_assignable_by(actor).order_by("name", "id")[:CHOICE_ROWS]),
        "open_tasks": list(
            tasks_visible_to(actor)
            .exclude(status__in=[TaskState.ARCHIVED, TaskState.CANCELLED, TaskState.REJECTED])
            .order_by("-updated_at", "-id")
            .only("id", "title", "status")[:CHOICE_ROWS]
        ),
        "open_requirements": list(
            requirements_visible_to(actor)
            .filter(status=RequirementState.IN_PROGRESS)
            .order_by("-updated_at", "-id")
            .only("id", "title")[:CHOICE_ROWS]
        ),
    }


def _visible(rows: QuerySet[Any], what: str) -> Cleaner:
    """A filter naming one of ``rows`` (those the caller may see) or ``none``."""

    def clean(raw: str) -> str:
        if raw != NONE and not rows.filter(id=raw).exists():
            raise Ignored(f"no {what} you can see has this id")
        return raw

    return clean


def _task_rows(actor: Actor, query: Query) -> QuerySet[Task]:
    """The caller's tasks (``tasks_visible_to``: the API's rule) chosen by the URL:
    ``status``, ``assigneeId`` and ``requirementId`` (as the API names them: an id, or
    ``none``), ``q`` (words of the title, or the task's id)."""
    wanted = query.read(
        {
            "status": one_of(TaskState.values),
            "assigneeId": _visible(agents_visible_to(actor), "agent"),
            "requirementId": _visible(requirements_visible_to(actor), "requirement"),
            "q": search_text,
        }
    )
    rows = tasks_visible_to(actor)
    if "status" in wanted:
        rows = rows.filter(status=wanted["status"])
    for name, column in (("assigneeId", "assignee_id"), ("requirementId", "requirement_id")):
        if name in wanted:
            value = wanted[name]
            rows = rows.filter(**({f"{column}__isnull": True} if value == NONE else {column: value}))
    if wanted.get("q"):
        rows = rows.filter(Q(title__icontains=wanted["q"]) | Q(id=wanted["q"]))
    return rows.select_related("assignee").order_by("-updated_at", "-id")


def _requirement_rows(actor: Actor, query: Query) -> QuerySet[Requirement]:
    wanted = query.read({"rstatus": one_of(RequirementState.values), "rq": search_text})
    rows = requirements_visible_to(actor)
    if "rstatus" in wanted:
        rows = rows.filter(status=wanted["rstatus"])
    if wanted.get("rq"):
        rows = rows.filter(Q(title__icontains=wanted["rq"]) | Q(id=wanted["rq"]))
    return rows.order_by("-updated_at", "-id")


def _with_chosen(options: list[Any], rows: QuerySet[Any], chosen: str | None) -> list[Any]:
    """A filter's select: its first ``CHOICE_ROWS`` options, and the one the URL chose."""
    if chosen and chosen != NONE and all(o.id != chosen for o in options):
        return [*rows.filter(id=chosen), *options]
    return options


def _list_context(actor: Actor, params: QueryDict) -> dict[str, Any]:
    """``/work``'s two lists, a page of each, with their filters. A fixed number of
    queries whatever the number of rows."""
    query = Query(params)
    tasks = query.page(_task_rows(actor, query))
    requirements = query.page(_requirement_rows(actor, query), name="rpage")
    choices = _task_form_choices(actor)
    requirement_choices = requirements_visible_to(actor).order_by("-updated_at", "-id").only("id", "title")
    return {
        "tasks": tasks,
        "requirements": requirements,
        "filters": query.kept,
        "notes": query.notes,
        "list_url": (reverse("work") + query.url()).rstrip("?"),  # what a live refresh reads again: these rows
        "task_filters_hidden": query.hidden("rstatus", "rq", "rpage"),
        "requirement_filters_hidden": query.hidden("status", "assigneeId", "requirementId", "q", "page"),
        "filter_agents": _with_chosen(choices["assignable"], agents_visible_to(actor), query.kept.get("assigneeId")),
        "filter_requirements": _with_chosen(
            list(requirement_choices[:CHOICE_ROWS]), requirement_choices, query.kept.get("requirementId")
        ),
        **choices,
    }


def _history(entity: str, entity_id: str) -> list[dict[str, Any]]:
    return [history_row(c) for c in history_of(entity, entity_id)]


def _review_approval(user: User, task: Task) -> Approval | None:
    """The caller's pending question on the task: the approval of its filing (a task an
    agent filed), or its review, if the task waits for it."""
    if task.filing_approval_id:
        approval_id: str | None = task.filing_approval_id
    else:
        approval_id = (task.metadata or {}).get("reviewApprovalId")
        if task.status != TaskState.REVIEW:
            return None
    if not approval_id:
        return None
    return Approval.objects.filter(id=approval_id, user=user, status=Approval.State.PENDING).first()


def _task_context(request: HttpRequest, task: Task) -> dict[str, Any]:
    """A task's page. Its dependencies and its requirement are named only where the
    caller may see them (a teammate may see a task that waits for one of the owner's
    private tasks): the others are counted, never titled."""
    actor = _actor(request)
    task = Task.objects.select_related("assignee", "reviewer_agent", "reviewer_user", "requirement").get(id=task.id)
    seen = Exists(tasks_visible_to(actor).filter(id=OuterRef("id")))
    dependencies = list(task.depends_on.annotate(seen=seen).order_by("created_at", "id").only("id", "title", "status"))
    requirement = task.requirement
    if requirement is not None and not requirements_visible_to(actor).filter(id=requirement.id).exists():
        requirement = None
    return {
        "task": task,
        "task_requirement": requirement,
        "comments": task_comments(task),
        "history": _history(StatusChange.Entity.TASK, task.id),
        "transitions": [(s, TaskState(s).label) for s in TaskState.values if s in TASK_TRANSITIONS[task.status]],
        "dependencies": [d for d in dependencies if d.seen],
        "hidden_dependencies": sum(1 for d in dependencies if not d.seen),
        "approval": _review_approval(_user(request), task),
        "filing_approval": task.filing_approval_id is not None,
        "dependents": waiting_dependents_count(task),
        "transition_values": list(TASK_TRANSITIONS[task.status]),
    }


def _requirement_context(request: HttpRequest, requirement: Requirement) -> dict[str, Any]:
    actor = _actor(request)
    allowed = REQUIREMENT_TRANSITIONS[requirement.status]
    return {
        "requirement": requirement,
        "comments": requirement_comments(requirement),
        "history": _history(StatusChange.Entity.REQUIREMENT, requirement.id),
        "steps": [(step, to.label) for to, step in REQUIREMENT_STEPS.items() if to in allowed],
        "requirement_tasks": list(
            tasks_visible_to(actor).filter(requirement=requirement).select_related("assignee").order_by("created_at")
        ),
    }


def _render_work(
    request: HttpRequest, *, error: str = "", status: int = 200, form: QueryDict | None = None
) -> HttpResponse:
    """``/work`` as a GET shows it: the list, or ``?task=`` / ``?requirement=`` one of
    them (one the caller may not see answers 404, like a missing one). ``error`` and
    ``form`` (the refused post's input) are shown with it."""
    actor = _actor(request)
    context: dict[str, Any] = {"nav": "work", "error": error, "form": form or QueryDict()}
    task_id, requirement_id = request.GET.get("task"), request.GET.get("requirement")
    if task_id:
        context.update(_task_context(request, access_task(actor, task_id)))
    elif requirement_id:
        context.update(_requirement_context(request, access_requirement(actor, requirement_id)))
    else:
        context.update(_list_context(actor, request.GET))
        context.update(task_states=TaskState.choices, requirement_states=RequirementState.choices)
    return render(request, "work.html", context, status=status)


@require_GET
@login_required
def work_page(request: HttpRequest) -> HttpResponse:
    return _render_work(request)


def _refused(request: HttpRequest, exc: Exception, page: str) -> HttpResponse:
    """The page again (``page``: its query, e.g. ``task=<id>``) with the refusal."""
    status = getattr(exc, "status_code", 400) if isinstance(exc, MarkusError) else 403
    request.GET = QueryDict(page)
    return _render_work(request, error=str(exc), status=status, form=request.POST)


def _work_url(query: str = "") -> str:
    return reverse("work") + (f"?{query}" if query else "")


def _done(
    request: HttpRequest, page: str, write: Callable[..., Any], *, anchor: str = "", to: str = ""
) -> HttpResponse:
    """One of the pages' writes, ``write(actor=<the caller>)``, then back to the page
    (``page``: its query, e.g. ``task=<id>``; ``anchor``: ``comment`` for
    ``#comment-<id>`` of what the write made) or on to the page of what it made (``to``:
    ``task`` or ``requirement``); a refusal shows the page again with it."""
    try:
        made = write(actor=_actor(request))
    except MarkusError as exc:
        return _refused(request, exc, page)
    if to:
        return redirect(_work_url(f"{to}={made.id}"))
    return redirect(_work_url(page) + (f"#{anchor}-{made.id}" if anchor else ""))


# ---------------------------------------------------------------------------- writes


def _file(
    request: HttpRequest, body: serializers.Serializer, file: Callable[[Actor, Any], Any], kind: str
) -> HttpResponse:
    """A new-task or new-requirement form, checked as the API's body and filed through
    the API's own function: on to its page (``?<kind>=<id>``), or ``/work`` again with
    the refusal and the input kept."""
    if not body.is_valid():
        return _refused(request, MarkusError(_errors(body)), "")
    return _done(request, "", lambda actor: file(actor, body.validated_data), to=kind)


@require_POST
@login_required
def task_new(request: HttpRequest) -> HttpResponse:
    """File a task from the page's form: the API's body (``title``, ``description``,
    ``assigneeId``, ``reviewer`` as ``agent:<id>`` or ``user:<pk>``, ``dependsOn``
    (several), ``requirementId``, ``start``), through the API's ``file_task``."""
    post = request.POST
    reviewer = post.get("reviewer", "")
    kind, _, ref = reviewer.partition(":")
    data: dict[str, Any] = {
        "title": post.get("title", ""),
        "description": post.get("description", ""),
        "assigneeId": post.get("assigneeId") or None,
        "reviewerId": ref if kind == "agent" and ref else None,
        "reviewerUserId": ref if kind == "user" and ref else None,
        "dependsOn": [d for d in post.getlist("dependsOn") if d],
        "requirementId": post.get("requirementId") or None,
        "start": post.get("start") == "on",
    }
    if reviewer and kind not in ("agent", "user"):
        return _refused(request, MarkusError(f"reviewer: {reviewer!r} is not an agent or a person"), "")
    return _file(request, TaskCreateInput(data=data), file_task, "task")


@require_POST
@login_required
def requirement_new(request: HttpRequest) -> HttpResponse:
    data = {
        "title": request.POST.get("title", ""),
        "description": request.POST.get("description", ""),
        "agentId": request.POST.get("agentId") or None,
    }
    return _file(request, RequirementCreateInput(data=data), file_requirement, "requirement")


@require_POST
@login_required
def task_move(request: HttpRequest, task_id: str) -> HttpResponse:
    """A transition button: ``status``, an optional ``note`` and ``cascade``, through
    ``task_move``, as the API does (a refusal of the state machine or a rule shows its message)."""
    task = access_task(_actor(request), task_id)
    post = request.POST
    move = partial(
        services.task_move,
        task=task,
        to_status=post.get("status", ""),
        note=post.get("note", ""),
        cascade=post.get("cascade") == "on",  # the page shows the choice: unticked, it cancels alone
    )
    return _done(request, f"task={task.id}", move)


def _comment(request: HttpRequest, page: str, create: Callable[..., Any]) -> HttpResponse:
    """A comment from the form (``content``, ``replyToCommentId``) through ``create``,
    the API's comment service bound to the task or the requirement of ``page``."""
    post = request.POST
    write = partial(create, content=post.get("content", ""), reply_to_comment_id=post.get("replyToCommentId") or None)
    return _done(request, page, write, anchor="comment")


@require_POST
@login_required
def task_comment(request: HttpRequest, task_id: str) -> HttpResponse:
    task = access_task(_actor(request), task_id)
    return _comment(request, f"task={task.id}", partial(services.task_comment_create, task_id=task.id))


@require_POST
@login_required
def requirement_step(request: HttpRequest, requirement_id: str, step: str) -> HttpResponse:
    requirement = access_requirement(_actor(request), requirement_id)
    take = partial(STEP_FUNCTIONS[step], requirement_id=requirement.id, reason=request.POST.get("reason", ""))
    return _done(request, f"requirement={requirement.id}", take)


@require_POST
@login_required
def requirement_comment(request: HttpRequest, requirement_id: str) -> HttpResponse:
    requirement = access_requirement(_actor(request), requirement_id)
    create = partial(services.requirement_comment_create, requirement_id=requirement.id)
    return _comment(request, f"requirement={requirement.id}", create)


# ---------------------------------------------------------------------------- approvals


def _answered(user: User, query: Query) -> Listed:
    """The caller's answered approvals, a page at a time, newest answer first: ``q``
    (words of the question's title) and ``agentId`` (the agent that asked)."""
    agents = agents_visible_to(Actor.for_user(user))
    wanted = query.read({"q": search_text, "agentId": _visible(agents, "agent")})
    rows = approvals_for(user, status=Approval.State.ANSWERED)
    if wanted.get("q"):
        rows = rows.filter(title__icontains=wanted["q"])
    if "agentId" in wanted:
        value = wanted["agentId"]
        rows = rows.filter(**({"agent__isnull": True} if value == NONE else {"agent_id": value}))
    return query.page(rows.select_related("agent").order_by("-answered_at", "-id"), per_page=ANSWERED_SHOWN)


def _approvals_context(user: User, params: QueryDict) -> dict[str, Any]:
    pending = list(approvals_for(user, status=Approval.State.PENDING).select_related("agent")[:APPROVALS_SHOWN])
    query = Query(params)
    answered = _answered(user, query)
    agents = agents_visible_to(Actor.for_user(user)).order_by("name", "id")
    asked = [a.id for a in pending]
    tasks = dict(
        Task.objects.filter(metadata__reviewApprovalId__in=asked).values_list("metadata__reviewApprovalId", "id")
    )
    tasks.update(Task.objects.filter(filing_approval_id__in=asked).values_list("filing_approval_id", "id"))
    return {
        "pending": [{"a": a, "taskId": tasks.get(a.id)} for a in pending],
        "pending_count": approvals_for(user, status=Approval.State.PENDING).count(),
        "answered": answered,
        "filters": query.kept,
        "notes": query.notes,
        "filter_agents": _with_chosen(list(agents[:CHOICE_ROWS]), agents, query.kept.get("agentId")),
        "nav": "approvals",
    }


@require_GET
@login_required
def approvals_page(request: HttpRequest) -> HttpResponse:
    return render(request, "approvals.html", _approvals_context(_user(request), request.GET))


@require_POST
@login_required
def approval_answer(request: HttpRequest, approval_id: str) -> HttpResponse:
    """Answer one of the caller's approvals: ``selectedOption`` (an option's id, or the
    free-form ``answer`` where the question allows one) and an optional ``comment``.
    Back to ``next`` (a path on this site) or the approvals page."""
    user = _user(request)
    option = request.POST.get("selectedOption", "")
    if option == "__freeform__":
        option = request.POST.get("answer", "").strip()
    back = request.POST.get("next", "")
    if not back.startswith("/") or back.startswith("//"):
        back = reverse("approvals")
    try:
        approval_respond(
            user=user, approval_id=approval_id, selected_option=option, comment=request.POST.get("comment", "")
        )
    except MarkusError as exc:
        context = {**_approvals_context(user, QueryDict()), "error": _refusal(user, approval_id, exc)}
        # The comment typed is shown back whole: its question may be gone from the page.
        context["kept_comment"] = request.POST.get("comment", "")
        return render(request, "approvals.html", context, status=exc.status_code)
    return redirect(back)


def _refusal(user: User, approval_id: str, exc: MarkusError) -> str:
    """What the page says to a refused answer: for one already answered, with what and when."""
    done = Approval.objects.filter(user=user, id=approval_id).exclude(status=Approval.State.PENDING).first()
    if done is None:
        return str(exc)
    if done.status == Approval.State.CANCELLED:
        return f"“{done.title}” was withdrawn (its question no longer stands); your answer was not recorded."
    when = done.answered_at.strftime("%Y-%m-%d %H:%M UTC") if done.answered_at else ""
    return f"“{done.title}” was already answered: {done.selected_option}, {when}. Your answer was not recorded."
