"""A reasoning model served over the OpenAI wire by a server that does not split its
reasoning out (no reasoning parser) writes it into the content, between ``<think>`` and
``</think>``, or, when the chat template opened the tag in the prompt, with only the
closing tag. The reasoning is not the answer: it is left out of the answer's text and of
the deltas a person watches (``markus.llm.base.ReasoningFilter``), so neither a reply nor
a call written as text comes out of it. Played by the misbehaving server through the real
``openai`` SDK, streamed and whole."""

from __future__ import annotations

import pytest

from markus.llm.base import CallContext, get_provider
from tests.llm.misbehaving_model import MisbehavingModel, answer, ramble, whole

THOUGHT = "<think>\nThe user asks about the release. Maybe call memory_search first? No.\n</think>\n\n"


def ask(model_server, behaviour) -> tuple[str, str, str]:
    deltas: list[str] = []
    with MisbehavingModel(behaviour) as server:
        model_server(server.url)
        r = get_provider().complete(
            system="s",
            messages=[{"role": "user", "content": "when?"}],
            tools=[],
            context=CallContext(on_delta=deltas.append),
        )
    return r.text, "".join(deltas), r.finish_reason


@pytest.mark.parametrize("sent", ["streamed", "whole"])
def test_the_reasoning_between_think_tags_is_left_out_of_the_answer_and_its_deltas(model_server, sent):
    behaviour = answer(THOUGHT + "The release is on Friday.")
    text, streamed, _ = ask(model_server, whole(behaviour) if sent == "whole" else behaviour)
    assert text == "The release is on Friday."
    assert "memory_search" not in streamed and "think>" not in streamed


def test_reasoning_whose_tag_the_template_opened_ends_at_the_closing_tag(model_server):
    text, _, _ = ask(model_server, answer("The user asks about the release.\n</think>\n\nOn Friday."))
    assert text == "On Friday."


def test_an_answer_that_only_thought_until_its_limit_has_no_text(model_server):
    text, streamed, finish = ask(model_server, ramble("<think> hmm", limit=50))
    assert (text, streamed, finish) == ("", "", "length")


def test_an_answer_that_only_mentions_the_tag_is_kept_whole(model_server):
    said = "Use <think> and </think> tags to mark reasoning in the prompt."
    text, streamed, _ = ask(model_server, answer(said))
    assert text == streamed == said


def test_an_answer_as_short_as_the_start_of_the_tag_is_streamed_at_its_end(model_server):
    text, streamed, _ = ask(model_server, answer("<th"))
    assert text == streamed == "<th"
