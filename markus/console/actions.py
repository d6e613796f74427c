"""Helpers for admin actions: run a step per object and report, and the intermediate
form page (message text, drop reason) that posts back to the same action."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from markus.core.errors import MarkusError
from markus.core.limits import CHAT_TEXT_MAX_CHARS

_T = TypeVar("_T")


def run_each(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    objects: Iterable[_T],
    label: str,
    step: Callable[[_T], str | None],
) -> None:
    """Call ``step(obj)`` for each object; a MarkusError is reported, not raised.
    ``step`` may return a note to show for that object."""
    done = 0
    notes: list[str] = []
    failed: list[str] = []
    for obj in objects:
        try:
            note = step(obj)
            done += 1
            if note:
                notes.append(note)
        except MarkusError as exc:
            failed.append(str(exc))
    if done:
        modeladmin.message_user(request, f"{label}: {done} done.", messages.SUCCESS)
    for note in notes:
        modeladmin.message_user(request, f"{label}: {note}", messages.INFO)
    for failure in failed:
        modeladmin.message_user(request, f"{label} refused: {failure}", messages.ERROR)


class MessageForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5, "cols": 80}),
        max_length=CHAT_TEXT_MAX_CHARS,  # the chat's own bound
        help_text="Sent as a chat from you (sender role: user).",
    )


class DropForm(forms.Form):
    reason = forms.CharField(max_length=250, help_text="Stored on the item, with your name.")


def form_action(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    queryset: QuerySet[Any],
    *,
    form_class: type[forms.Form],
    title: str,
    action: str,
    submit: str,
    on_valid: Callable[[dict[str, Any]], None],
) -> TemplateResponse | None:
    """First call: show the form. The form posts back to the changelist with the
    action and the selection; when it is valid, ``on_valid`` runs and the admin
    returns to the changelist (None)."""
    if request.POST.get("apply"):
        form = form_class(request.POST)
        if form.is_valid():
            on_valid(form.cleaned_data)
            return None
    else:
        form = form_class()
    opts = modeladmin.model._meta
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": title,
        "form": form,
        "queryset": queryset,
        "action": action,
        "submit": submit,
        "opts": opts,
        "app_label": opts.app_label,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "admin/console/action_form.html", context)
