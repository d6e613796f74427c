"""The long-term memory tools as the LLM calls them (through the real tool loop or the
dispatcher): memory_save, memory_search, memory_search_longterm,
memory_update_longterm, memory_consolidate (dream cycle only), and recall_activity
reading an activity's log."""

from __future__ import annotations

import json

import pytest

from attention import loop
from attention.models import AgentActivity
from attention.toolbox import ToolContext, execute_tool, schemas_for
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from markus.memory import selectors
from markus.memory.document import DOCUMENT_LIMIT, SECTION_LIMIT
from markus.memory.models import MemorySection, MemoryState, Observation

from .conftest import save

pytestmark = [pytest.mark.pg, pytest.mark.django_db]


def call(agent, name, args, scenario="chat", item_id=None):
    ok, text = execute_tool(
        ToolContext(agent_id=agent.id, agent_name=agent.name, scenario=scenario, mailbox_item_id=item_id), name, args
    )
    return ok, json.loads(text)


@pytest.fixture
def scripted():
    holder = {}

    def install(*turns):
        holder["p"] = ScriptedProvider(list(turns))
        set_provider_override(holder["p"])
        return holder["p"]

    yield install
    set_provider_override(None)


def test_the_memory_tools_are_offered_where_the_agent_works(agent):
    def names(scenario):
        return {s["function"]["name"] for s in schemas_for(scenario)}

    for scenario in ("chat", "task_execution", "a2a", "review", "comment_response", "deliberation"):
        assert {"memory_save", "memory_search", "memory_search_longterm"} <= names(scenario)
    for scenario in ("dream_cycle", "deliberation"):  # MEMORY.md by hand: the dream curates it
        assert "memory_update_longterm" in names(scenario)
    assert "memory_update_longterm" not in names("chat") and "memory_save" not in names("dream_cycle")
    assert "memory_consolidate" in names("dream_cycle")
    assert "memory_consolidate" not in names("chat")
    assert "memory_save" not in names("triage")
    ok, answer = call(agent, "memory_consolidate", {"remove": []}, scenario="chat")
    assert not ok and "unknown tool" in answer["error"]


def test_an_observation_saved_in_the_loop_is_found_by_memory_search(agent, scripted):
    scripted(
        Turn(tool_calls=[("memory_save", {"content": "Bob wants release notes in German", "kind": "preference"})]),
        Turn(text="noted"),
    )
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.MENTION, payload={"summary": "release"})
    loop.run_attention(agent.id)
    obs = Observation.objects.get(agent=agent)
    assert (obs.kind, obs.mailbox_item_id) == ("preference", item.id)
    assert obs.activity_id == AgentActivity.objects.get(mailbox_item_id=item.id).id
    ok, found = call(agent, "memory_search", {"query": "german release notes?"})
    assert ok and [o["content"] for o in found["observations"]] == ["Bob wants release notes in German"]


@pytest.mark.parametrize(
    ("args", "message"),
    [({"content": "   "}, "must not be empty"), ({"content": "x" * 1001}, "at most 1000 characters")],
)
def test_memory_save_refuses_what_it_cannot_keep(agent, args, message):
    ok, answer = call(agent, "memory_save", args)
    assert not ok and message in answer["error"]
    assert not Observation.objects.exists()


def test_memory_update_longterm_replaces_appends_deletes_and_keeps_the_limits(agent):
    def write(args):
        return call(agent, "memory_update_longterm", args, scenario="dream_cycle")

    assert write({"section": "Lessons", "content": "Test first."})[0]
    assert write({"section": "lessons", "content": "Small PRs.", "mode": "append"})[0]
    assert selectors.document(agent.id)[0].content == "Test first.\nSmall PRs."
    ok, answer = write({"section": "Lessons", "content": "y" * (SECTION_LIMIT + 1)})
    assert not ok and "limit is 3000" in answer["error"]
    for i in range(4):
        assert write({"section": f"S{i}", "content": "z" * 2990})[0]
    ok, answer = write({"section": "S5", "content": "z" * 2990})
    assert not ok and f"the limit is {DOCUMENT_LIMIT}" in answer["error"]
    assert MemorySection.objects.filter(agent=agent).count() == 5
    ok, found = call(agent, "memory_search_longterm", {"query": "small PRs"})
    assert ok and found["sections"][0]["section"] == "Lessons"
    assert write({"section": "Lessons", "mode": "delete"})[0]
    ok, answer = write({"section": "Lessons", "mode": "delete"})
    assert not ok and "no section" in answer["error"]


def test_consolidation_removes_merges_promotes_and_trims_to_the_limits(agent, grace):
    a, b, c, d = save(agent.id, "deploys need approval", "Deploys need approval.", "stale note", "lunch at noon")
    (foreign,) = save(grace.id, "grace's own")
    MemorySection.objects.create(
        agent=agent, title="Lessons", content="\n".join(f"old lesson {i:03d}" for i in range(200))
    )
    for i in range(4):
        MemorySection.objects.create(
            agent=agent, title=f"Filler {i}", content="\n".join(["f" * 99] * 30), position=i + 1
        )
    plan = {
        "remove": [c, foreign, 999999],
        "merge": [{"ids": [a, b], "text": "Deploys need approval"}],
        "promote": [
            {"section": "Lessons", "text": "- Deploys need approval"},
            {"section": "Lessons", "text": "deploys need approval"},
        ],
    }
    ok, result = call(agent, "memory_consolidate", plan, scenario="dream_cycle")
    assert ok, result
    assert (result["removed"], result["merged"], result["promoted"], result["alreadyKnown"]) == (1, 1, 1, 1)
    assert result["ignoredIds"] == [foreign, 999999]
    assert Observation.objects.filter(id=foreign).exists()
    merged = Observation.objects.get(id=a)
    assert (merged.content, merged.count) == ("Deploys need approval", 2)
    assert set(Observation.objects.filter(agent=agent).values_list("id", flat=True)) == {a, d}
    doc = selectors.document(agent.id)
    assert all(len(s.content) <= SECTION_LIMIT for s in doc)
    assert result["documentChars"] == len(selectors.markdown(agent.id)) <= DOCUMENT_LIMIT
    lessons = next(s for s in doc if s.title == "Lessons")
    assert lessons.content.endswith("- Deploys need approval")  # the newest line is kept
    assert "old lesson 000" not in lessons.content  # the oldest went first
    assert result["trimmedChars"] > 0 and len(selectors.markdown(agent.id)) > DOCUMENT_LIMIT - 200
    assert MemoryState.objects.get(agent=agent).consolidated_through == d


@pytest.mark.parametrize(
    "args",
    [
        {"remove": ["1"]},
        {"merge": [{"ids": [1], "text": ""}]},
        {"promote": ["x"]},
        {"promote": [{"section": "", "text": "t"}]},
    ],
)
def test_a_malformed_consolidation_is_a_tool_error(agent, args):
    ok, answer = call(agent, "memory_consolidate", args, scenario="dream_cycle")
    assert not ok and "error" in answer


def test_recall_activity_lists_activities_and_reads_one_log(agent, grace, scripted):
    scripted(
        Turn(tool_calls=[("memory_save", {"content": "the build uses make"})]),
        Turn(text="all done"),
    )
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "build"})
    loop.run_attention(agent.id)
    activity = AgentActivity.objects.get(mailbox_item_id=item.id)
    ok, listed = call(agent, "recall_activity", {})
    assert ok and [a["id"] for a in listed["activities"]] == [activity.id]
    assert listed["activities"][0]["mailboxItemId"] == item.id
    ok, read = call(agent, "recall_activity", {"activity_id": activity.id})
    assert ok and read["activity"]["id"] == activity.id
    kinds = [line["type"] for line in read["logs"]]
    assert "tool_start" in kinds and "tool_end" in kinds
    assert any("all done" in line["content"] for line in read["logs"])
    assert [line["seq"] for line in read["logs"]] == sorted(line["seq"] for line in read["logs"])
    first = read["logs"][0]["seq"]
    ok, page = call(agent, "recall_activity", {"activity_id": activity.id, "after_seq": first, "limit": 1})
    assert ok and len(page["logs"]) == 1 and page["logs"][0]["seq"] > first and page["more"] is True
    ok, answer = call(grace, "recall_activity", {"activity_id": activity.id})
    assert not ok and "no activity" in answer["error"]
