"""Notifications and approvals in the operator console. An approval is answered on
its own page (``…/approval/<id>/answer/``, linked from the list and the change page),
which calls ``approval_respond`` on behalf of the user who was asked, so the parked
mailbox item is re-queued exactly as if they had answered; the admin log records
which operator answered."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from markus.console.modeladmin import ConsoleModelAdmin
from markus.core.errors import MarkusError

from .models import Approval, UserNotification
from .services import approval_respond


@admin.register(UserNotification)
class UserNotificationAdmin(ConsoleModelAdmin):
    list_display = ("title", "user", "type", "priority", "read", "created_at", "id")
    list_filter = ("type", "priority", "read")
    search_fields = ("id", "title", "body", "user__username")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
    date_hierarchy = "created_at"


def option_choices(approval: Approval) -> list[tuple[str, str]]:
    choices = []
    for option in approval.options or []:
        if isinstance(option, dict) and option.get("id"):
            choices.append((str(option["id"]), str(option.get("label") or option["id"])))
        elif isinstance(option, str):
            choices.append((option, option))
    return choices


class AnswerForm(forms.Form):
    option = forms.ChoiceField(required=False, widget=forms.RadioSelect)
    freeform = forms.CharField(required=False, max_length=200, label="Or answer in your own words")
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "cols": 60}))

    def __init__(self, *args: Any, approval: Approval, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        option = self.fields["option"]
        assert isinstance(option, forms.ChoiceField)  # declared above
        option.choices = option_choices(approval)
        if not approval.allow_freeform:
            del self.fields["freeform"]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        answer = (data.get("freeform") or "").strip() or data.get("option")
        if not answer:
            raise forms.ValidationError("Choose an option.")
        data["answer"] = answer
        return data


@admin.register(Approval)
class ApprovalAdmin(ConsoleModelAdmin):
    list_display = ("title", "user", "agent", "status", "selected_option", "created_at", "answer_link", "id")
    list_filter = ("status",)
    search_fields = ("id", "title", "user__username", "agent__id")
    list_select_related = ("user", "agent")
    raw_id_fields = ("user", "agent", "mailbox_item")
    readonly_fields = (
        "id",
        "user",
        "agent",
        "mailbox_item",
        "title",
        "description",
        "options",
        "allow_freeform",
        "status",
        "selected_option",
        "comment",
        "created_at",
        "answered_at",
    )
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # approvals are asked by agents (approval_create)

    def has_change_permission(self, request: HttpRequest, obj: Approval | None = None) -> bool:
        # The change page is view-only; answering is the one change, on its own page.
        return obj is None and super().has_change_permission(request)

    def may_answer(self, request: HttpRequest) -> bool:
        return super().has_change_permission(request)

    @admin.display(description="answer")
    def answer_link(self, obj: Approval) -> str:
        if obj.status != Approval.State.PENDING:
            return "—"
        return format_html(
            '<a href="{}">Answer</a>', reverse("admin:notifications_approval_answer", args=[quote(obj.pk)])
        )

    def get_urls(self) -> list[URLPattern]:
        answer = path(
            "<path:object_id>/answer/",
            self.admin_site.admin_view(self.answer_view),
            name="notifications_approval_answer",
        )
        return [answer, *super().get_urls()]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        approval = Approval.objects.filter(pk=unquote(object_id)).first()
        extra = {
            "can_answer": bool(approval and approval.status == Approval.State.PENDING and self.may_answer(request))
        }
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})

    def answer_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not self.may_answer(request):
            raise PermissionDenied
        approval = get_object_or_404(Approval.objects.select_related("user", "agent"), pk=unquote(object_id))
        change_url = reverse("admin:notifications_approval_change", args=[quote(approval.pk)])
        if approval.status != Approval.State.PENDING:
            self.message_user(request, f"{approval.id} is already {approval.status}.", messages.WARNING)
            return HttpResponseRedirect(change_url)
        form = AnswerForm(request.POST if request.method == "POST" else None, approval=approval)
        if request.method == "POST" and form.is_valid():
            try:
                approval_respond(
                    user=approval.user,
                    approval_id=approval.id,
                    selected_option=form.cleaned_data["answer"],
                    comment=form.cleaned_data["comment"],
                )
            except (MarkusError, Http404) as exc:
                form.add_error(None, str(exc))
            else:
                note = f"Answered {form.cleaned_data['answer']!r} on behalf of {approval.user.get_username()}"
                self.log_change(request, approval, note)
                self.message_user(request, f"{approval.id}: {note}.", messages.SUCCESS)
                return HttpResponseRedirect(change_url)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Answer: {approval.title}",
            "approval": approval,
            "form": form,
            "opts": self.model._meta,
            "change_url": change_url,
        }
        return TemplateResponse(request, "admin/console/approval_answer.html", context)
