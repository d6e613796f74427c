"""Tool servers in the operator console: register, edit, offer to teams, attach, set
policies, and see each server's state as the workers last saw it (its tools, its last
error). The secrets (``env``, ``headers``) are write-only here too: the form starts them
empty and keeps what is stored unless something is typed. The API's rules check every
save; a server registered here is owned by who registers it unless another is chosen."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from markus.console.modeladmin import ConsoleModelAdmin
from markus.core.api import first_error
from markus.core.errors import MarkusError

from .models import ToolServer
from .runtime import runtime
from .serializers import ToolServerInput
from .services import CONNECTION_FIELDS, check_transport, check_url, listed_tools

_KEEP = "write-only: leave empty to keep what is stored ({keys}); {{}} to clear"


class ToolServerForm(forms.ModelForm):
    env = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    headers = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    args = forms.CharField(required=False, help_text='a JSON list, e.g. ["--repository", "/srv/repo"]')
    policies = forms.CharField(required=False, help_text='JSON, e.g. {"git_commit": "ask", "git_reset": "deny"}')
    idempotent = forms.CharField(
        required=False,
        help_text='JSON, e.g. {"git_status": true}: a call in flight at a crash is made again (not named: '
        "its idempotentHint)",
    )

    class Meta:
        model = ToolServer
        fields = (
            "name",
            "description",
            "transport",
            "command",
            "args",
            "env",
            "url",
            "headers",
            "timeout_seconds",
            "enabled",
            "policies",
            "idempotent",
            "owner",
            "offered_to",
            "offered_to_all",
            "agents",
            "teams",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        instance = self.instance
        for secret in ("env", "headers"):
            keys = ", ".join(sorted(getattr(instance, secret) or {})) or "none"
            self.fields[secret].help_text = _KEEP.format(keys=keys)
            self.initial[secret] = ""
        self.initial["args"] = json.dumps(instance.args or [])
        self.initial["policies"] = json.dumps(instance.policies or {})
        self.initial["idempotent"] = json.dumps(instance.idempotent or {})
        if "owner" in self.fields:
            owner = self.fields["owner"]
            owner.queryset = User.objects.filter(is_staff=True, is_active=True)  # type: ignore[attr-defined]
            owner.help_text += " (empty on a new server: you)"

    def _json(self, name: str, empty: Any) -> Any:
        raw = (self.cleaned_data.get(name) or "").strip()
        if not raw:
            return empty
        try:
            return json.loads(raw)
        except ValueError:
            raise forms.ValidationError({name: f"{name} is not valid JSON"}) from None

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        instance = self.instance
        args = self._json("args", [])
        policies = self._json("policies", {})
        idempotent = self._json("idempotent", {})
        env = self._json("env", None)
        headers = self._json("headers", None)
        body = {
            "name": data.get("name") or "",
            "description": data.get("description") or "",
            "transport": data.get("transport") or "",
            "command": data.get("command") or "",
            "args": args,
            "env": instance.env if env is None else env,
            "url": data.get("url") or "",
            "headers": instance.headers if headers is None else headers,
            "timeoutSeconds": data.get("timeout_seconds") or 30,
            "policies": policies,
            "idempotent": idempotent,
        }
        checked = ToolServerInput(data=body)
        if not checked.is_valid():
            raise forms.ValidationError(first_error(checked.errors))
        try:
            check_transport(body)
            if instance.pk is None or {"transport", "url"} & set(self.changed_data):
                check_url(body)
        except MarkusError as exc:
            raise forms.ValidationError(str(exc)) from None
        data.update(args=args, policies=policies, idempotent=idempotent, env=body["env"], headers=body["headers"])
        return data


@admin.register(ToolServer)
class ToolServerAdmin(ConsoleModelAdmin):
    form = ToolServerForm
    list_display = ("name", "transport", "enabled", "owner", "offered_to_all", "state", "tool_count", "error_line")
    list_filter = ("transport", "enabled", "offered_to_all", "state")
    list_select_related = ("owner",)
    search_fields = ("name", "description")
    filter_horizontal = ("agents", "teams", "offered_to")
    readonly_fields = ("state", "last_error", "state_at", "listed_at", "tool_table")

    @admin.display(description="tools")
    def tool_count(self, obj: ToolServer) -> int:
        return len(obj.tools or [])

    @admin.display(description="last error")
    def error_line(self, obj: ToolServer) -> str:
        return (obj.last_error or "")[:120]

    @admin.display(
        description="tools as last listed (name, policy, read-only, made again after a crash, why not offered)"
    )
    def tool_table(self, obj: ToolServer) -> str:
        rows = listed_tools(obj)
        if not rows:
            return "not listed yet: a worker lists them on first use"
        return format_html(
            "<table>{}</table>",
            format_html_join(
                "",
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                (
                    (
                        r["offeredAs"] or r["name"],
                        r["policy"],
                        "read-only" if r["readOnly"] else "",
                        "repeatable" if r["repeatable"] else "",
                        f"not offered: {r['notOffered']}" if r["notOffered"] else "",
                    )
                    for r in rows
                ),
            ),
        )

    def save_model(self, request: HttpRequest, obj: ToolServer, form: forms.ModelForm, change: bool) -> None:
        if change and CONNECTION_FIELDS & set(form.changed_data):  # perhaps another server: list anew
            obj.listed_at = None
        if not change and obj.owner is None and isinstance(request.user, User):
            obj.owner = request.user
        super().save_model(request, obj, form, change)
        transaction.on_commit(lambda: runtime().forget(obj.name))
