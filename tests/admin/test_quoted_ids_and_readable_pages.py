"""The admin through the links it renders itself (object ids quoted: ``_`` becomes
``_5F``): quoted ids reach their pages, created ids are read only, and pages, titles,
JSON and times read well."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone

from markus.agents.models import Agent
from notifications.models import Approval
from notifications.services import approval_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def approval(alice, agent):
    return approval_create(user=alice, title="Deploy?", agent=agent)


def test_the_changelist_links_to_the_change_page_with_the_id_quoted(operator, approval):
    assert "_" in approval.pk
    change_url = reverse("admin:notifications_approval_change", args=[quote(approval.pk)])
    assert change_url in operator.get(reverse("admin:notifications_approval_changelist")).content.decode()


def test_the_change_page_reached_by_the_quoted_id_offers_the_answer(operator, approval):
    change_url = reverse("admin:notifications_approval_change", args=[quote(approval.pk)])
    page = operator.get(change_url)
    assert page.status_code == 200 and page.context["can_answer"] is True
    answer_url = reverse("admin:notifications_approval_answer", args=[quote(approval.pk)])
    assert answer_url in page.content.decode()


def test_the_answer_page_reached_by_the_quoted_id_answers(operator, approval):
    answer_url = reverse("admin:notifications_approval_answer", args=[quote(approval.pk)])
    form = operator.get(answer_url)
    assert form.status_code == 200 and b'value="approve"' in form.content
    response = operator.post(answer_url, {"option": "approve"})
    assert response.status_code == 302
    approval.refresh_from_db()
    assert approval.status == Approval.State.ANSWERED and approval.selected_option == "approve"


def test_an_agents_id_is_read_only_on_its_change_page(operator, agent):
    url = reverse("admin:agents_agent_change", args=[quote(agent.pk)])
    page = operator.get(url)
    assert page.status_code == 200
    assert "id" not in page.context["adminform"].form.fields
    data = {
        "id": "renamed",
        "name": agent.name,
        "role": agent.role,
        "kind": agent.kind,
        "team": agent.team_id or "",
        "owner": agent.owner_id or "",
    }
    response = operator.post(url, data)
    assert response.status_code in (200, 302)
    assert Agent.objects.filter(pk=agent.pk).exists() and not Agent.objects.filter(pk="renamed").exists()


@pytest.mark.parametrize(
    "model_admin",
    [pytest.param(name, id=name) for name in ("agents.Agent", "agents.Team", "work.Task", "work.Requirement")],
)
def test_every_string_primary_key_is_read_only_once_created(model_admin):
    from django.apps import apps
    from django.contrib import admin
    from django.test import RequestFactory

    model = apps.get_model(model_admin)
    model_admin_obj = admin.site._registry[model]
    request = RequestFactory().get("/")
    existing = model(pk="x_1")
    assert "id" in model_admin_obj.get_readonly_fields(request, existing)


def test_agent_rows_and_change_page_link_to_the_mind_view(operator, agent):
    mind = f"/agents/{agent.id}/mind/"
    assert mind in operator.get(reverse("admin:agents_agent_changelist")).content.decode()
    assert mind in operator.get(reverse("admin:agents_agent_change", args=[quote(agent.pk)])).content.decode()


def test_plural_names_read_well():
    from attention.models import AgentActivity, LLMSession
    from markus.agents.models import WorkingMemory

    assert str(AgentActivity._meta.verbose_name_plural) == "agent activities"
    assert str(WorkingMemory._meta.verbose_name_plural) == "working memories"
    assert str(LLMSession._meta.verbose_name_plural) == "LLM sessions"


def test_the_approval_change_page_is_titled_by_its_title(operator, approval):
    page = operator.get(reverse("admin:notifications_approval_change", args=[quote(approval.pk)]))
    assert "Approval object" not in page.content.decode()
    assert "Deploy?" in page.context["title"]


def test_json_is_shown_pretty_printed_and_read_only(operator, approval):
    page = operator.get(reverse("admin:notifications_approval_change", args=[quote(approval.pk)]))
    html = page.content.decode()
    assert '<pre class="console-json">' in html
    assert '"id": "approve"' in html.replace("&quot;", '"')
    assert "\n    " in html.split('<pre class="console-json">', 1)[1].split("</pre>", 1)[0]  # indented


def test_list_columns_lead_with_the_title_and_end_with_a_short_id_and_times_to_the_second(operator, approval):
    page = operator.get(reverse("admin:notifications_approval_changelist"))
    html = page.content.decode()
    results = html.split('id="result_list"', 1)[1]
    headers = results.split('<th scope="col"')[1:]
    assert 'class="action-checkbox-column"' in headers[0] and "column-title" in headers[1]
    assert "column-short_id" in headers[-1]
    assert f'<code title="{approval.pk}">' in html and approval.pk[-6:] in html
    local = timezone.localtime(approval.created_at).strftime("%Y-%m-%d %H:%M:%S")
    assert local in results


def test_read_only_times_on_a_change_page_show_seconds(operator, approval):
    page = operator.get(reverse("admin:notifications_approval_change", args=[quote(approval.pk)]))
    assert timezone.localtime(approval.created_at).strftime("%Y-%m-%d %H:%M:%S") in page.content.decode()
