"""Every page of the console, given junk, answers without a server error: a change list
with junk in its search, ordering, paging, filters and date drill-down; an add or change
form with junk in any one of its fields (the form again with the field's error); a
history, a delete page, an action on ids no row has.

A sweep over every registered model (the console's own and the packages' it shows), not
one case; ``console`` puts rows in every table so each change and delete page is reached.
A failure lists every request that answered 5xx, to replay by hand; the single cases it
found are kept as tests in ``test_console_bad_forms.py`` and ``test_console_bad_urls.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.forms.models import model_to_dict
from django.test import RequestFactory
from django.urls import NoReverseMatch, reverse

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

JUNK = ["", "x" * 3000, "-1", "9" * 30, "1.5", "2026-13-45", "25:61:61", "{", "a\x00b"]


def _admin_name(model: Any, page: str) -> str:
    return f"admin:{model._meta.app_label}_{model._meta.model_name}_{page}"


def _change_list_parameters(model_admin: Any) -> list[str]:
    names = ["q", "o", "p", "all", "_to_field", "_popup", "e", "_facets"]
    for entry in model_admin.list_filter or ():
        if isinstance(entry, str):
            names += [entry, f"{entry}__exact", f"{entry}__id__exact", f"{entry}__isnull", f"{entry}__gte"]
        elif isinstance(entry, tuple):
            names += [entry[0], f"{entry[0]}__exact"]
        elif getattr(entry, "parameter_name", None):
            names.append(entry.parameter_name)
    if hierarchy := model_admin.date_hierarchy:
        names += [f"{hierarchy}__year", f"{hierarchy}__month", f"{hierarchy}__day"]
    return names


def test_no_change_list_nor_page_of_a_row_answers_junk_with_a_server_error(operator, console, unrecorded_templates):
    operator.raise_request_exception = False
    failed = []

    def check(method: str, url: str, data: dict[str, Any] | None = None, what: str = "") -> None:
        status = getattr(operator, method)(url, data or {}).status_code
        if status >= 500:
            failed.append((method, url, what[:40], status))

    for model, model_admin in sorted(admin.site._registry.items(), key=lambda pair: pair[0]._meta.label):
        changes = reverse(_admin_name(model, "changelist"))
        for name in _change_list_parameters(model_admin):
            for value in JUNK:
                check("get", changes, {name: value}, f"{name}={value}")
        for value in JUNK:
            check("get", changes, {"o": value, "q": value, "p": value}, f"o, q, p={value}")
        check("post", changes, {"action": "delete_selected", "_selected_action": ["nope", "%"]}, "action")
        try:
            add = reverse(_admin_name(model, "add"))
        except NoReverseMatch:  # a model the console only shows
            pass
        else:
            check("get", add)
            check("post", add, {}, "nothing")
            check("post", add, {f.name: "x" * 3000 for f in model._meta.fields}, "every field too long")
        for row in model.objects.all()[:3]:
            change = reverse(_admin_name(model, "change"), args=[quote(row.pk)])
            for url in (change, change.replace("/change/", "/history/"), change.replace("/change/", "/delete/")):
                check("get", url)
            check("post", change, {}, "nothing")
            check("post", change, {f.name: "x" * 3000 for f in model._meta.fields}, "every field too long")
    assert failed == []


def _form_value(value: Any) -> Any:
    """A model's value as its form posts it."""
    if isinstance(value, dict):
        return json.dumps(value, default=str)
    if isinstance(value, list | tuple | set):
        return [str(getattr(v, "pk", v)) for v in value]
    return "" if value is None else getattr(value, "pk", value)


def test_no_add_or_change_form_answers_junk_in_one_field_with_a_server_error(
    operator, operator_user, console, unrecorded_templates
):
    operator.raise_request_exception = False
    failed = []
    for model, model_admin in sorted(admin.site._registry.items(), key=lambda pair: pair[0]._meta.label):
        targets = [(reverse(_admin_name(model, "change"), args=[quote(r.pk)]), r) for r in model.objects.all()[:2]]
        try:
            targets.append((reverse(_admin_name(model, "add")), None))
        except NoReverseMatch:
            pass
        for url, row in targets:
            request = RequestFactory().get(url)
            request.user = operator_user
            form = model_admin.get_form(request, row)
            valid = {} if row is None else model_to_dict(row)
            valid = {name: _form_value(value) for name, value in valid.items() if name in form.base_fields}
            for name in form.base_fields:
                for value in JUNK:
                    # One field junk, the others as the row holds them; a split date and
                    # time widget posts ``name_0`` and ``name_1``.
                    data = {**valid, name: value, f"{name}_0": value, f"{name}_1": value}
                    status = operator.post(url, data).status_code
                    if status >= 500:
                        failed.append((url, name, value[:15], status))
    assert failed == []
