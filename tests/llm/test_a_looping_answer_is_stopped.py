"""An answer that has fallen into a loop is stopped where it began to repeat itself: the
same block of lines written three times in a row ends the stream (the client closes it,
so the server stops writing), and the answer is its first copy, said to be cut short. The
real small model wrote one line to its max_tokens (2,048 tokens in 274 s). What the
openai provider does is held in ``tests/attention/test_model_contract.py``; here, the
rule itself and the anthropic provider through its real SDK."""

from __future__ import annotations

import functools

import pytest

from attention import loop
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.llm.base import Repetition
from markus.usage.models import LLMCall

from .stub_anthropic import INPUT_TOKENS, StubAnthropic

LINE = "The last commit teaches the parser about tabs, in two files.\n"


def stopped_at(text: str, piece: int = 7) -> int | None:
    """Where ``Repetition`` stops ``text`` fed in pieces of ``piece`` characters: the
    length it keeps, or None when it never stops."""
    looping = Repetition()
    for start in range(0, len(text), piece):
        if looping.feed(text[start : start + piece]):
            return looping.kept
    return None


def test_one_line_three_times_in_a_row_stops_and_keeps_the_first():
    assert stopped_at(LINE * 50) == len(LINE)
    assert stopped_at("Intro.\n" + LINE * 3) == len("Intro.\n") + len(LINE)
    assert stopped_at(LINE * 2) is None  # twice is not yet a loop


def test_a_block_of_lines_repeated_three_times_stops_after_its_first_copy():
    block = '```json\n{"name": "git_log", "arguments": {"max_count": 1}}\n```\n'
    assert stopped_at("Let me look.\n" + block * 20) == len("Let me look.\n") + len(block)


@pytest.mark.parametrize(
    "text",
    [
        "ok\n" * 40,  # short lines repeat in real answers: a line must say something to count
        "\n" * 40,
        "".join(f"{i}. step number {i} of the plan, done carefully\n" for i in range(40)),
        LINE * 2 + "And then something else entirely was said.\n" + LINE * 2,
    ],
    ids=["short lines", "blank lines", "a numbered list", "twice, then another line"],
)
def test_answers_that_do_not_loop_are_read_to_their_end(text):
    assert stopped_at(text) is None


@pytest.fixture
def anthropic_settings(model_server):
    return functools.partial(model_server, provider="anthropic", LLM_API_KEY="sk-ant-test", LLM_MODEL="stub-claude")


@pytest.mark.django_db(transaction=True)
def test_the_anthropic_provider_stops_a_looping_answer_and_the_person_gets_its_first_copy(anthropic_settings, agent):
    with StubAnthropic([{"content": LINE * 100, "chunk_delay": 0.002}]) as stub:
        anthropic_settings(stub.url, TRIAGE=False, INTERRUPT_JUDGE=False)
        mailbox_enqueue(
            agent_id=agent.id,
            source_type=T.HUMAN_CHAT,
            payload={"summary": "last commit", "content": "What did the last commit do?"},
            metadata={"senderId": "1", "senderRole": "user"},
        )
        loop.run_attention(agent.id)
        assert stub.wire.closed.wait(5) and not stub.wire.finished.is_set()  # left mid-answer
    [told] = ChatMessage.objects.filter(role="assistant", session__agent_id=agent.id)
    assert told.content == LINE.strip() + "\n\n(This answer was cut short: it repeated itself.)"
    # The prompt's count came first (message_start) and is kept; what it wrote is
    # estimated from all it wrote before the loop was seen, not from the copy kept.
    [spent] = LLMCall.objects.filter(agent_id=agent.id)
    assert spent.estimated and spent.input_tokens == INPUT_TOKENS
    assert spent.output_tokens >= 3 * len(LINE) // 4
