"""An API request that enqueues an item and the item's processing share a trace: the
Django instrumentation makes the request's span, the item keeps its traceparent, and the
item's invoke_agent span is its child, whichever run processes it (a plain call of the
loop, or the Celery task the request's commit sent, which is in the same trace too)."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind

from attention.loop import run_attention
from mailbox.models import MailboxItem
from tests.attention.conftest import celery_worker, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)


def _post_chat(client, agent, text="When is the release?"):
    response = client.post(
        f"/api/agents/{agent.id}/mailbox",
        {"sourceType": "human_chat", "payload": {"content": text}},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _request_span(exporter):
    [server] = [s for s in exporter.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert server.name == "POST api/agents/<str:agent_id>/mailbox"
    status = server.attributes.get("http.response.status_code", server.attributes.get("http.status_code"))
    assert status == 201  # (the older HTTP conventions unless OTEL_SEMCONV_STABILITY_OPT_IN says)
    return server


def _item_spans(exporter, item_id):
    return [
        s
        for s in exporter.get_finished_spans()
        if s.name.startswith("invoke_agent") and s.attributes.get("markus.mailbox.item_id") == item_id
    ]


def _item_span(exporter, item_id):
    [span] = _item_spans(exporter, item_id)
    return span


def _runs(exporter):
    return [s for s in exporter.get_finished_spans() if s.name == "run/attention.run_attention"]


@pytest.mark.django_db
def test_the_request_that_enqueues_an_item_and_its_processing_share_a_trace(spans, agent, alice_client):
    item_id = _post_chat(alice_client, agent)
    server = _request_span(spans)
    marks = MailboxItem.objects.get(id=item_id).marks
    assert marks["traceparent"].split("-")[1] == format(server.context.trace_id, "032x")

    assert item_id in run_attention(agent.id).items
    item = _item_span(spans, item_id)
    assert item.context.trace_id == server.context.trace_id
    assert item.parent is not None and item.parent.span_id == server.context.span_id
    assert any(s.parent and s.parent.span_id == item.context.span_id for s in spans.get_finished_spans())


@pytest.mark.django_db
def test_two_requests_processed_in_one_run_keep_their_own_traces(spans, agent, alice_client, settings):
    settings.MARKUS = {**settings.MARKUS, "TRIAGE": False}  # one after the other, as they came
    first = _post_chat(alice_client, agent, "First question")
    second = _post_chat(alice_client, agent, "Second question")
    requests = sorted((s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER), key=lambda s: s.start_time)
    assert len(requests) == 2 and requests[0].context.trace_id != requests[1].context.trace_id
    result = run_attention(agent.id)
    assert {first, second} <= set(result.items)
    for request, item_id in zip(requests, (first, second), strict=True):
        assert _item_span(spans, item_id).context.trace_id == request.context.trace_id


@pytest.mark.pg
def test_the_celery_task_the_request_sent_is_in_its_trace_and_linked_from_the_item_span(
    spans, celery_worker, agent, alice_client
):
    item_id = _post_chat(alice_client, agent)
    wait_for(lambda: MailboxItem.objects.get(id=item_id).status == "completed", timeout=30, message="chat answered")
    [item] = wait_for(lambda: _item_spans(spans, item_id), message="the item's span")
    [link] = item.links
    # The run that processed it: other wake-ups (the agent's start, say) may run the loop
    # too and end in their own traces; the item's link names the one that took it.
    run = wait_for(
        lambda: next((r for r in _runs(spans) if r.context.span_id == link.context.span_id), None),
        message="the task's span",  # ended once the run let go of its lease
    )
    server = _request_span(spans)
    assert run.kind == SpanKind.CONSUMER
    assert run.context.trace_id == server.context.trace_id  # the wake-up carried the request's context
    assert item.context.trace_id == server.context.trace_id
