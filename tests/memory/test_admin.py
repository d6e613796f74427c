"""MEMORY.md in the operator console: sections are edited within the limits, exported as
one markdown file per agent; observations and the dream state are listed."""

from __future__ import annotations

import pytest
from django.test import Client

from markus.memory import search, selectors, services
from markus.memory.models import MemorySection

from .conftest import save

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(django_user_model):
    django_user_model.objects.create_superuser("operator", "op@example.com", "pw-operator")
    client = Client()
    assert client.login(username="operator", password="pw-operator")
    return client


def test_the_console_exports_memory_md(agent, operator):
    services.section_write(agent_id=agent.id, title="People", content="- Bob approves deploys")
    services.section_write(agent_id=agent.id, title="Lessons", content="Test first.")
    ids = [str(i) for i in MemorySection.objects.values_list("id", flat=True)]
    response = operator.post("/admin/memory/memorysection/", {"action": "export_markdown", "_selected_action": ids[:1]})
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="MEMORY-ada.md"'
    assert response.content.decode() == selectors.markdown(agent.id)


def test_a_section_edited_in_the_console_keeps_the_limits(agent, operator):
    services.section_write(agent_id=agent.id, title="Lessons", content="Test first.")
    row = MemorySection.objects.get()
    url = f"/admin/memory/memorysection/{row.id}/change/"
    form = {"agent": agent.id, "title": "Lessons", "position": 0}
    too_long = operator.post(url, {**form, "content": "x" * 3001})
    assert too_long.status_code == 200 and "the limit is 3000" in too_long.content.decode()
    assert operator.post(url, {**form, "content": "Small PRs."}).status_code == 302
    assert selectors.document(agent.id)[0].content == "Small PRs."
    found = MemorySection.objects.filter(id__in=[h.id for h in search.search_sections(agent.id, "PRs")])
    assert [s.title for s in found] == ["Lessons"]


def test_the_memory_changelists_open(agent, operator):
    save(agent.id, "an observation")
    services.section_write(agent_id=agent.id, title="People", content="x")
    for url in (
        "/admin/memory/memorysection/",
        "/admin/memory/observation/?q=observation",
        "/admin/memory/memorystate/",
    ):
        assert operator.get(url).status_code == 200, url


def test_a_dreams_memory_state_is_not_added_by_hand(agent, operator):
    # Every field is the dream cycle's to write (read-only here): an empty "add" was a 500
    # (no agent), so the console offers no "add" for it.
    assert operator.get("/admin/memory/memorystate/add/").status_code == 403
    assert operator.post("/admin/memory/memorystate/add/", {}).status_code == 403
    assert b"/admin/memory/memorystate/add/" not in operator.get("/admin/memory/memorystate/").content
