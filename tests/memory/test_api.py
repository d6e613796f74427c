"""The long-term memory API: MEMORY.md read (markdown and sections) and replaced as
markdown (400 for a section over its limit or a bad title, 413 over the document's
limit, 404 for an agent the caller cannot see), and the full-text searches, every
answer matching its documented schema."""

from __future__ import annotations

import pytest

from markus.memory import selectors, services
from markus.memory.document import DOCUMENT_LIMIT, SECTION_LIMIT
from tests.api.test_typed_responses import assert_matches_schema

from .conftest import save

pytestmark = [pytest.mark.pg, pytest.mark.django_db]
MEMORY = "/api/agents/{agent_id}/memory"
OBSERVATIONS = "/api/agents/{agent_id}/memory/observations"
SEARCH = "/api/agents/{agent_id}/memory/search"


def test_memory_md_is_read_as_markdown_and_by_section(agent, alice_client):
    services.section_write(agent_id=agent.id, title="People", content="- Alice owns releases")
    services.section_write(agent_id=agent.id, title="Lessons", content="Never deploy on Friday")
    save(agent.id, "one", "two")
    response = alice_client.get("/api/agents/ada/memory")
    assert response.status_code == 200
    body = response.json()
    assert_matches_schema("GET", MEMORY, 200, body)
    assert body["markdown"] == "## People\n\n- Alice owns releases\n\n## Lessons\n\nNever deploy on Friday\n"
    assert [s["title"] for s in body["sections"]] == ["People", "Lessons"]
    assert (body["observationCount"], body["newObservations"], body["dreams"]) == (2, 2, 0)
    assert body["limits"] == {"sectionChars": SECTION_LIMIT, "documentChars": DOCUMENT_LIMIT}


def test_put_replaces_the_document_keeping_unchanged_sections(agent, alice_client):
    services.section_write(agent_id=agent.id, title="People", content="- Alice owns releases")
    kept = selectors.sections(agent.id).get().id
    text = "# MEMORY.md\n\n## People\n\n- Alice owns releases\n\n## Tools\n\nmake test before pushing\n"
    response = alice_client.put("/api/agents/ada/memory", {"markdown": text}, format="json")
    assert response.status_code == 200, response.content
    assert_matches_schema("PUT", MEMORY, 200, response.json())
    assert response.json()["markdown"] == text.removeprefix("# MEMORY.md\n\n")
    assert selectors.sections(agent.id).get(title="People").id == kept
    found = alice_client.get("/api/agents/ada/memory/search?q=pushing").json()
    assert [s["title"] for s in found["sections"]] == ["Tools"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"markdown": "## Big\n\n" + "x" * (SECTION_LIMIT + 1)}, 400, "limit is 3000"),
        ({"markdown": "## A\n\none\n\n## a\n\ntwo"}, 400, "appears twice"),
        ({"markdown": 42}, 400, "markdown must be a string"),
        ({}, 400, "markdown is required"),
        ({"markdown": "## Huge\n\n" + "y" * DOCUMENT_LIMIT}, 413, "the limit is 15000"),
        (
            {"markdown": "".join(f"## S{i}\n\n{'z' * 2990}\n\n" for i in range(5)) + "## S5\n\nz"},
            413,
            "the limit is 15000",
        ),
    ],
)
def test_put_refuses_what_is_over_the_limits(agent, alice_client, body, status, message):
    services.section_write(agent_id=agent.id, title="Keep", content="unchanged")
    response = alice_client.put("/api/agents/ada/memory", body, format="json")
    assert response.status_code == status, response.content
    assert message in response.json()["detail"]
    assert_matches_schema("PUT", MEMORY, status, response.json())
    if status == 413:
        assert response.json()["limit"] == DOCUMENT_LIMIT
    assert selectors.markdown(agent.id) == "## Keep\n\nunchanged\n"


def test_an_agent_the_caller_cannot_see_is_404(agent, charlie_client):
    for url in ("/api/agents/ada/memory", "/api/agents/ada/memory/observations", "/api/agents/ada/memory/search?q=x"):
        response = charlie_client.get(url)
        assert response.status_code == 404
    assert charlie_client.put("/api/agents/ada/memory", {"markdown": ""}, format="json").status_code == 404


def test_observations_are_listed_newest_first_or_searched_best_first(agent, grace, alice_client):
    save(agent.id, "deploy checklist lives in the wiki", "coffee machine is broken", "deploy deploy deploy friday")
    save(grace.id, "deploy secrets of grace")
    listed = alice_client.get("/api/agents/ada/memory/observations?limit=2").json()
    assert_matches_schema("GET", OBSERVATIONS, 200, listed)
    assert [o["content"] for o in listed["observations"]] == ["deploy deploy deploy friday", "coffee machine is broken"]
    assert listed["totalCount"] == 3 and listed["observations"][0]["rank"] is None
    found = alice_client.get("/api/agents/ada/memory/observations", {"q": 'deploy" OR *'}).json()
    assert_matches_schema("GET", OBSERVATIONS, 200, found)
    assert [o["content"] for o in found["observations"]] == [
        "deploy deploy deploy friday",
        "deploy checklist lives in the wiki",
    ]
    bad = alice_client.get("/api/agents/ada/memory/observations?limit=0")
    assert bad.status_code == 400
    assert_matches_schema("GET", OBSERVATIONS, 400, bad.json())


@pytest.mark.parametrize("query", ["'; DROP TABLE memory_sections; --", 'NEAR("a" b)', "\"'\\", "a:b -c ^d*", "&|!<->"])
def test_operators_and_quotes_in_q_never_fail(agent, alice_client, query):
    save(agent.id, "drop the old table after the migration")
    for path in ("observations", "search"):
        response = alice_client.get(f"/api/agents/ada/memory/{path}", {"q": query})
        assert response.status_code == 200, response.content
    assert alice_client.get("/api/agents/ada/memory").json()["observationCount"] == 1


def test_an_operator_saves_an_observation_that_search_then_finds(agent, alice_client):
    response = alice_client.post(
        "/api/agents/ada/memory/observations", {"content": "Ship notes go to #releases", "kind": "fact"}, format="json"
    )
    assert response.status_code == 201, response.content
    assert_matches_schema("POST", OBSERVATIONS, 201, response.json())
    assert response.json()["kind"] == "fact"
    found = alice_client.get("/api/agents/ada/memory/observations?q=releases").json()["observations"]
    assert [o["id"] for o in found] == [response.json()["id"]]
    for body, message in (({"content": " "}, "must not be empty"), ({"content": 3}, "content must be a string")):
        bad = alice_client.post("/api/agents/ada/memory/observations", body, format="json")
        assert bad.status_code == 400 and message in bad.json()["detail"]
        assert_matches_schema("POST", OBSERVATIONS, 400, bad.json())
