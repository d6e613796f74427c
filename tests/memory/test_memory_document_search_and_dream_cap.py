"""Memory's edges: MEMORY.md read from the API can be put back unchanged, and is measured
after its line endings are normalised; search finds a word with 'ß' by that same word; a
dream preempted by a chat still holds its place under the cap of dreams at once."""

from __future__ import annotations

import pytest

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from markus.agents.services import agent_create
from markus.memory import search, services
from tests.conftest import client_for

# ---------------------------------------------------------------------------- MEMORY.md


@pytest.mark.django_db
def test_memory_document_read_from_the_api_can_be_put_back_unchanged(agent, alice):
    """GET /memory then PUT of the very markdown it returned answers 400 when a section's
    text holds a '## ' line (written by memory_update_longterm or a dream's promote)."""
    services.section_write(agent_id=agent.id, title="Deploys", content="Fridays only\n## Rollback\nuse the script")
    services.section_write(agent_id=agent.id, title="Rollback", content="ask ops first")
    client = client_for(alice)
    before = client.get(f"/api/agents/{agent.id}/memory").json()

    answer = client.put(f"/api/agents/{agent.id}/memory", {"markdown": before["markdown"]}, format="json")

    assert answer.status_code == 200, answer.json()
    assert [(s["title"], s["content"]) for s in answer.json()["sections"]] == [
        (s["title"], s["content"]) for s in before["sections"]
    ]


# ---------------------------------------------------------------------------- search


@pytest.mark.django_db
@pytest.mark.pg
def test_memory_search_finds_a_word_with_sharp_s_by_that_same_word(agent):
    """memory_search('Hauptstraße') finds nothing though an observation holds that word:
    search.terms casefolds the query ('ß' -> 'ss') while neither FTS5 nor to_tsvector
    folds the stored text, on both databases."""
    [saved] = [services.memory_save(agent_id=agent.id, content="The office moved to Hauptstraße 5").id]
    services.section_write(agent_id=agent.id, title="Straße", content="the address of the office")

    assert [h.id for h in search.search_observations(agent.id, "Hauptstraße")] == [saved]
    assert len(search.search_sections(agent.id, "Straße")) == 1


# ---------------------------------------------------------------------------- dream cycle


@pytest.mark.django_db
def test_a_dream_preempted_by_a_chat_still_holds_its_place_under_the_cap(alice):
    """A dream preempted by a person's chat is deferred for resumption (seconds) and no
    longer counted by dream.dreaming_now (queued/processing only): a check in that window
    starts a 4th dream, and once the preempted one resumes 4 agents dream at once."""
    from datetime import timedelta

    from django.utils import timezone

    from mailbox import lifecycle
    from markus.memory.dream import dream_check
    from markus.memory.models import Observation

    crew = [agent_create(name=f"D{i}", owner=alice, agent_id=f"d{i}")[0] for i in range(4)]
    for i, a in enumerate(crew):
        Observation.objects.bulk_create(Observation(agent_id=a.id, content=f"note {n}") for n in range(50 + i))
    assert dream_check() == 3  # d1, d2, d3
    dream = MailboxItem.objects.get(agent_id="d3", source_type=MailboxType.MEMORY_CONSOLIDATION)
    MailboxItem.objects.filter(id=dream.id).update(status=Status.PROCESSING)
    # A chat preempts it: settle defers it for resumption a few seconds later.
    assert lifecycle.defer(dream.id, until=timezone.now() + timedelta(seconds=5), from_statuses=[Status.PROCESSING])

    assert dream_check() == 0


@pytest.mark.django_db
def test_memory_document_with_windows_line_endings_is_measured_as_the_document(agent, alice):
    """PUT /memory refuses with 413 a MEMORY.md that is within 15,000 characters once
    parsed, only because it came with CRLF line endings (a Windows editor):
    services.document_replace checks the raw text's length before normalising it."""
    section = "\n".join(["x" * 48] * 60)  # 2,939 characters
    markdown = "\n\n".join(f"## Part {i}\n\n{section}" for i in range(5)) + "\n"
    windows = markdown.replace("\n", "\r\n")
    assert len(markdown) <= 15000 < len(windows)

    answer = client_for(alice).put(f"/api/agents/{agent.id}/memory", {"markdown": windows}, format="json")

    assert answer.status_code == 200, answer.json()
    assert answer.json()["markdown"] == markdown
