"""A bad URL never makes the console answer 500, on any registered model: a regex
lookup in a change list's query string is refused like any bad lookup (Django's
``?e=1``), and an id that is not of the key's type is a missing object."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.test import RequestFactory
from django.urls import reverse

pytestmark = pytest.mark.django_db

MODELS = sorted(admin.site._registry, key=lambda model: model._meta.label)


def url_name(model, view: str) -> str:
    return f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}"


def change_url(model, object_id: str) -> str:
    return reverse(url_name(model, "change"), args=["ID"]).replace("ID", object_id)


@pytest.mark.parametrize("pattern", ["(", "."])
@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.label)
def test_a_regex_lookup_on_a_change_list_is_refused_as_a_bad_lookup(operator, console, model, pattern):
    # "(" is invalid everywhere; "." is valid, but SQLite and PostgreSQL disagree on
    # which patterns are, so none reaches the database.
    for lookup in ("id__regex", f"{model._meta.pk.name}__iregex"):
        response = operator.get(reverse(url_name(model, "changelist")), {lookup: pattern})
        assert response.status_code == 302 and response["Location"].endswith("?e=1")


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.label)
def test_a_change_list_with_other_lookups_still_answers(operator, console, model):
    response = operator.get(reverse(url_name(model, "changelist")), {f"{model._meta.pk.name}__isnull": "False"})
    assert response.status_code == 200


DATED = [model for model in MODELS if admin.site._registry[model].date_hierarchy]


@pytest.mark.parametrize("part", ["year", "month", "day"])
@pytest.mark.parametrize("model", DATED, ids=lambda model: model._meta.label)
def test_a_date_too_large_for_the_date_hierarchy_is_refused_as_a_bad_lookup(operator, console, model, part):
    # Django's date hierarchy catches a ValueError from the date, not an OverflowError.
    field = admin.site._registry[model].date_hierarchy
    query = {f"{field}__year": "2026", f"{field}__{part}": "9" * 20}
    response = operator.get(reverse(url_name(model, "changelist")), query)
    assert response.status_code == 302 and response["Location"].endswith("?e=1")


@pytest.mark.parametrize("object_id", ["abc", "1.5"])
@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.label)
def test_an_id_of_the_wrong_type_is_a_404_not_a_500(operator, console, model, object_id):
    from django.core.exceptions import ValidationError

    response = operator.get(change_url(model, object_id))
    try:
        model._meta.pk.to_python(object_id)
    except ValidationError:  # not of the key's type (an integer key): nothing is named
        assert response.status_code == 404
    else:  # a string key: a missing object, Django's answer (back to the index, with a message)
        assert response.status_code == 302 and response["Location"] == reverse("admin:index")


@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.label)
def test_a_nul_in_an_id_is_a_bad_request_not_a_500(operator, console, model):
    assert operator.get(change_url(model, "%00")).status_code == 400


@pytest.mark.parametrize("selected", ["abc", "1.5", "a\x00b"], ids=["word", "fraction", "nul"])
@pytest.mark.parametrize("model", MODELS, ids=lambda model: model._meta.label)
def test_an_action_on_an_id_no_row_can_have_changes_nothing_and_says_so(
    operator, operator_user, console, model, selected
):
    """A change list's action names its rows by id (``_selected_action``); an id no row
    can have (``abc`` for an integer key, a NUL in any) was a 500 from the filter. A NUL
    is refused where it enters, as in any form (``markus.core.input``): 400, naming it."""
    from django.core.exceptions import ValidationError

    try:
        model._meta.pk.to_python(selected)
        possible = True
    except ValidationError:
        possible = False
    url = reverse(url_name(model, "changelist"))
    request = RequestFactory().post(url)
    request.user = operator_user
    actions = list(admin.site._registry[model].get_actions(request))
    before = model._default_manager.count()
    response = operator.post(
        url,
        {"action": actions[0] if actions else "delete_selected", "_selected_action": [selected], "index": "0"},
        follow=True,
    )
    if "\x00" in selected:
        assert response.status_code == 400 and model._default_manager.count() == before
        assert response.json()["detail"] == "_selected_action: NUL bytes are not allowed"
        return
    assert response.status_code == 200
    assert model._default_manager.count() == before  # (a possible id: the action's confirmation page)
    if actions and not possible:
        shown = [str(m) for m in response.context["messages"]]
        assert shown == [f"{selected!r} is not the id of any {model._meta.verbose_name}: nothing was changed."]
