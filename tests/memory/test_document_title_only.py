"""A document whose only text is its ``# `` title line: the title line is not stored
(MEMORY.md is its ``## `` sections), so such a document is refused with a 400 that says
why, instead of emptying the memory and answering 200. An empty document still clears."""

from __future__ import annotations

import pytest

from markus.core.errors import MarkusError
from markus.memory import services
from markus.memory.document import parse

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("text", ["# Title only", "\n# Title only\n\n", "# MEMORY.md\r\n"])
def test_a_document_of_only_its_title_is_refused_by_parse(text):
    with pytest.raises(MarkusError, match="only its title") as refused:
        parse(text)
    assert refused.value.status_code == 400


def test_a_title_before_sections_is_still_the_documents_own(agent):
    assert [s.title for s in parse("# MEMORY.md\n\n## People\n\nAlice\n")] == ["People"]
    assert parse("") == [] and parse("\n  \n") == []


def test_put_of_a_title_only_document_is_400_and_keeps_the_memory(agent, alice_client):
    services.document_replace(agent_id=agent.id, markdown="## People\n\nAlice owns the release\n")
    response = alice_client.put("/api/agents/ada/memory", {"markdown": "# Title only"}, format="json")
    assert response.status_code == 400
    assert "only its title" in response.json()["detail"]
    kept = alice_client.get("/api/agents/ada/memory").json()
    assert kept["markdown"] == "## People\n\nAlice owns the release\n"


def test_put_of_an_empty_document_still_clears_it(agent, alice_client):
    services.document_replace(agent_id=agent.id, markdown="## People\n\nAlice\n")
    response = alice_client.put("/api/agents/ada/memory", {"markdown": ""}, format="json")
    assert response.status_code == 200 and response.json()["markdown"] == ""
