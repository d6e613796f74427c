"""The base of every ModelAdmin of the console: string primary keys are read-only
once the row exists (renaming one would orphan its references: an IntegrityError),
the change page is titled by the object's title or name, editable JSON fields are
indented, read-only ones are shown indented in a ``<pre>``, and date-times (list
columns and read-only fields) are shown to the second. A bad URL is never a 500:
regex lookups in a change list's query string are refused (every registered admin,
``refuse_regex_lookups``), so is a date hierarchy's number too large for a date, and an
id no row can have is a missing object, or an action that changes nothing and says so;
a many-to-many id the key's column cannot hold is the field's error."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models import QuerySet
from django.db.models.constants import LOOKUP_SEP
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html

TITLE_ATTRIBUTES = ("title", "name", "label", "summary")
PRETTY = "_pretty"
REGEX_LOOKUPS = ("regex", "iregex")


def pretty_json(value: Any) -> str:
    """Indented JSON in a ``<pre>`` (escaped), or ``—`` when empty."""
    if value in (None, "", [], {}):
        return "—"
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    return format_html('<pre class="console-json">{}</pre>', text)


def with_seconds(value: datetime | None) -> str:
    """A date-time in the current time zone, to the second."""
    if value is None:
        return "—"
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def short_id(value: str, keep: int = 6) -> str:
    """``apr_…e57a9c`` for a long id (the prefix and the tail); a short one whole."""
    prefix, _, rest = value.partition("_")
    if len(value) <= 14 or not rest:
        return value
    return f"{prefix}_…{rest[-keep:]}"


def short_id_column(pk: str) -> Callable[[models.Model], str]:
    @admin.display(description="id", ordering=pk)
    def column(obj: models.Model) -> str:
        full = str(obj.pk)
        return format_html('<code title="{}">{}</code>', full, short_id(full))

    column.__name__ = "short_id"
    return column


def object_title(obj: models.Model) -> str:
    for attribute in TITLE_ATTRIBUTES:
        value = getattr(obj, attribute, None)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return str(obj)


class PrettyJSONFormField(forms.JSONField):
    """An editable JSON field shown indented."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str) or value is None:
            return super().prepare_value(value)
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, cls=self.encoder)


class KeyCheckedChoices(forms.ModelMultipleChoiceField):
    """Django's many-to-many choice, each id also checked against what the key's column
    holds: Django checks an id's type, then asks for all of them with one ``IN``, where
    SQLite raised OverflowError for an integer past 64 bits (a 500)."""

    def clean(self, value: Any) -> Any:
        if self.queryset is not None and isinstance(value, list | tuple):
            opts = self.queryset.model._meta
            key = opts.get_field(self.to_field_name) if self.to_field_name else opts.pk
            for pk in value:
                try:
                    key.run_validators(key.to_python(pk))
                except (ValidationError, ValueError, TypeError):
                    raise ValidationError(
                        self.error_messages["invalid_pk_value"], code="invalid_pk_value", params={"pk": pk}
                    ) from None
        return super().clean(value)


class NoRegexLookups(admin.ModelAdmin):
    """Refuses ``?<field>__regex=`` and ``__iregex`` from a change list's query string
    the way Django refuses any bad lookup (``IncorrectLookupParameters``: the list
    answers ``?e=1``). A bad pattern fails only in the database, as a 500, and SQLite
    and PostgreSQL do not agree on which patterns are bad, so none is let through. So is a
    date hierarchy's number too large for a date (Django catches only a ValueError there).
    An id no row can have is a missing object, or an action that changes nothing."""

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        kwargs.setdefault("form_class", KeyCheckedChoices)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def _may_be_key(self, value: str) -> bool:
        """Could a row have this id? Not one of another type than the key's (``abc`` for an
        integer key). (A NUL, which no text column of PostgreSQL holds, is refused before
        any view: ``markus.core.input``.)"""
        try:
            self.model._meta.pk.to_python(value)
        except (ValidationError, ValueError, TypeError):
            return False
        return True

    def _known_key(self, object_id: str) -> None:
        """An id no row can have names nothing: 404."""
        if not self._may_be_key(unquote(object_id)):
            raise Http404(f"no {self.model._meta.verbose_name} with id {object_id[:80]!r}")

    def response_action(self, request: HttpRequest, queryset: QuerySet[Any]) -> HttpResponse | None:
        """An action on the rows a change list's form names (``_selected_action``): an id no
        row can have changes nothing and is said (the filter raised it, a 500)."""
        for selected in request.POST.getlist(helpers.ACTION_CHECKBOX_NAME):
            if not self._may_be_key(selected):
                name = self.model._meta.verbose_name
                self.message_user(
                    request, f"{selected[:80]!r} is not the id of any {name}: nothing was changed.", messages.WARNING
                )
                return None  # the change list answers it as any failed action: back to the list
        return super().response_action(request, queryset)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self._known_key(object_id)
        return super().change_view(request, object_id, form_url, extra_context)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self._known_key(object_id)
        return super().delete_view(request, object_id, extra_context)

    def history_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        self._known_key(object_id)
        return super().history_view(request, object_id, extra_context)

    def get_changelist_instance(self, request: HttpRequest) -> ChangeList:
        for key in request.GET:
            if key.rpartition(LOOKUP_SEP)[2] in REGEX_LOOKUPS:
                raise IncorrectLookupParameters(f"{key}: regex lookups are not allowed in the console")
        try:
            return super().get_changelist_instance(request)
        except OverflowError as exc:  # the date hierarchy's year, month or day past a C long
            raise IncorrectLookupParameters(str(exc)) from exc


def refuse_regex_lookups(site: admin.AdminSite) -> None:
    """Gives the admins other apps registered (Django's, celery-beat's) the same rule:
    each is registered again as a subclass of its own class with ``NoRegexLookups``
    first. Called once every admin module is imported (``markus/admin.py``, the last
    app's)."""
    for model, model_admin in list(site._registry.items()):
        if isinstance(model_admin, NoRegexLookups):
            continue
        cls = type(model_admin)
        site.unregister(model)
        site.register(model, type(cls.__name__, (NoRegexLookups, cls), {"__module__": cls.__module__}))


class ConsoleModelAdmin(NoRegexLookups):
    formfield_overrides = {
        models.JSONField: {"form_class": PrettyJSONFormField, "widget": forms.Textarea(attrs={"rows": 8, "cols": 80})}
    }

    def _string_pk(self) -> str | None:
        pk = self.model._meta.pk
        return pk.name if isinstance(pk, models.CharField) else None

    def get_list_display(self, request: HttpRequest) -> list[Any]:
        """The string id moves to the last column, shortened; date-times show seconds."""
        names = list(super().get_list_display(request))
        pk = self._string_pk()
        columns: list[Any] = []
        for name in names:
            if pk and name == pk:
                continue
            columns.append(self._with_seconds(name) if isinstance(name, str) and self._is_datetime(name) else name)
        if pk and pk in names:
            columns.append(short_id_column(pk))
        return columns

    def _is_datetime(self, name: Any) -> bool:
        if not isinstance(name, str):
            return False
        try:
            field = self.model._meta.get_field(name)
        except FieldDoesNotExist:
            return False
        return isinstance(field, models.DateTimeField)

    def _with_seconds(self, name: str) -> Callable[[models.Model], str]:
        field = self.model._meta.get_field(name)

        @admin.display(description=str(getattr(field, "verbose_name", name)), ordering=name)
        def column(obj: models.Model) -> str:
            return with_seconds(getattr(obj, name, None))

        column.__name__ = name
        return column

    def _pretty_fields(self) -> set[str]:
        """Fields shown through ``<name>_pretty`` when read-only: JSON and date-times."""
        kinds = (models.JSONField, models.DateTimeField)
        return {f.name for f in self.model._meta.concrete_fields if isinstance(f, kinds)}

    def get_readonly_fields(self, request: HttpRequest, obj: Any | None = None) -> list[str]:
        """The string primary key once the row exists; a read-only JSON or date-time
        field becomes its ``<name>_pretty`` display."""
        fields = list(super().get_readonly_fields(request, obj))
        pk = self._string_pk()
        if obj is not None and pk and pk not in fields:
            fields.insert(0, pk)
        pretty = self._pretty_fields()
        return [f"{name}{PRETTY}" if name in pretty else name for name in fields]

    def get_fields(self, request: HttpRequest, obj: Any | None = None) -> list[Any]:
        fields = list(super().get_fields(request, obj))
        pretty = {name[: -len(PRETTY)] for name in self.get_readonly_fields(request, obj) if name.endswith(PRETTY)}
        shown: list[Any] = []
        for name in fields:
            if isinstance(name, str) and name in pretty:
                name = f"{name}{PRETTY}"
            if name not in shown:
                shown.append(name)
        return shown

    def __getattr__(self, name: str) -> Any:
        """``<json field>_pretty``: the value indented, in a ``<pre>``;
        ``<date-time field>_pretty``: to the second."""
        if name.endswith(PRETTY) and not name.startswith("_"):
            field_name = name[: -len(PRETTY)]
            try:
                field = self.model._meta.get_field(field_name)
            except FieldDoesNotExist:
                field = None
            if isinstance(field, models.JSONField | models.DateTimeField):
                show = pretty_json if isinstance(field, models.JSONField) else with_seconds

                @admin.display(description=str(field.verbose_name))
                def display(obj: models.Model) -> str:
                    return show(getattr(obj, field_name, None))

                return display
        raise AttributeError(name)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # get_object reads the id as the key's type: ``abc`` for an integer key is a
        # missing object (Django's redirect), not a ValueError.
        obj = self.get_object(request, unquote(object_id))
        extra = dict(extra_context or {})
        if obj is not None and "title" not in extra:
            extra["title"] = f"{str(self.model._meta.verbose_name).capitalize()}: {object_title(obj)}"
        return super().change_view(request, object_id, form_url, extra)
