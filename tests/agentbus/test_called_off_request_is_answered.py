"""A request its asker called off is answered all the same: the judge stopped the run for
the asker's newer message, and the asker, waiting on the first request's reply, hears
that it was called off, not silence."""

from __future__ import annotations

import pytest

from agentbus.models import Chunk, Stream
from mailbox.models import MailboxItem
from markus.llm.scripted import Turn
from tests.attention.conftest import celery_worker, scripted, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)

from .conftest import say

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("celery_worker")
def test_a_request_called_off_by_its_askers_newer_message_is_answered_saying_so(scripted, ada, eve):
    first = Turn(tool_calls=[("check_mailbox", {})], delay=1.0)
    scripted(first, default=Turn(text="Done."), judge_word="cancel")
    asked = say(eve, ada, "Please deploy v2")
    assert first.started.wait(15)
    say(eve, ada, "Never mind, do not deploy")

    reply = wait_for(
        lambda: Stream.objects.filter(reply_to=asked.stream_id, closed_at__isnull=False).first(),
        message="the first request answered",
    )
    (answer,) = Chunk.objects.filter(stream=reply)
    item = MailboxItem.objects.get(agent=ada.agent, marks__streamId=asked.stream_id)
    assert answer.payload["text"].startswith("I could not finish this: called off by a newer message from Eve")
    assert item.status == "completed"
