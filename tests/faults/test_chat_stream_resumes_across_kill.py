"""A chat's reply stream resumes across a kill -9 of the worker writing it: the client
reads a few pieces over real HTTP from the server process, the worker holding the
agent's lease is killed and the client's connection dropped; once the lease expires the
other worker's recovery re-queues the chat and runs it again (a new ``run``, the item's
``seq`` numbering going on), and ``GET /api/agents/{id}/chat`` with ``Last-Event-ID``
brings the pieces the client missed, the new run's, then one ``done``: every event
once, none missing, the reply the one stored."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import redis

from .harness import boot, leased_by, wait_until

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

SSE = "text/event-stream"
REPLY = " ".join(f"word{n}" for n in range(40))  # 20 pieces of two words
PIECE_S = 0.15


def read_events(response: httpx.Response, until) -> tuple[list[dict[str, Any]], bool]:
    """The events of an SSE response until ``until(events)`` holds (then the caller drops
    the connection) or the stream ends; and whether it ended."""
    events: list[dict[str, Any]] = []
    buffer = ""
    for text in response.iter_text():
        buffer += text
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "event" in fields:
                events.append({"id": fields.get("id"), "event": fields["event"], "data": json.loads(fields["data"])})
                if until(events):
                    return events, False
    return events, True


def test_a_reply_stream_resumes_after_its_worker_is_killed_with_every_piece_once(cluster, report, clock):
    from mailbox.models import MailboxItem
    from markus.agents.models import ChatMessage

    cluster.extra_env["MARKUS_CHAT_TIMEOUT_S"] = "90"  # the stream outlives the lease and the re-run
    cluster.llm.stream_chats(REPLY, PIECE_S)
    seeded = boot(cluster, agents=1)
    agent = seeded.agents[0]
    headers = {"Authorization": f"Token {seeded.token}", "Accept": SSE}
    url = f"{cluster.base}/api/agents/{agent}/chat"

    with httpx.Client(timeout=httpx.Timeout(60.0)) as client:
        with client.stream("POST", url, json={"text": "count for me"}, headers=headers) as first:
            assert first.status_code == 200, first.read()
            before, ended = read_events(first, lambda evs: sum(e["event"] == "delta" for e in evs) == 3)
            assert not ended
            item_id = before[0]["data"]["mailboxItemId"]
            pids = {name: cluster.procs[name].pid for name in ("w1", "w2")}
            victim = wait_until(
                lambda: next((n for n, pid in pids.items() if agent in leased_by(pid)), None),
                timeout=10,
                interval=0.05,
                what="the worker writing the reply",
            )
            # Two more pieces are written (kept in the scenario's Redis) that the client
            # does not read: the resume must bring them.
            kept = redis.Redis.from_url(cluster.redis.url)
            seen = int(before[-1]["id"].split(":")[1])
            wait_until(
                lambda: any(int(kept.get(k) or 0) >= seen + 2 for k in kept.scan_iter(f"*chatreply:{item_id}:n")),
                timeout=10,
                interval=0.02,
                what="two pieces the client has not read",
            )
            kept.close()
            cluster.kill(victim)  # the client's connection drops with the block's end
        killed_at = clock()
        assert MailboxItem.objects.get(id=item_id).status == "processing", "the kill landed mid-reply"
        assert not ChatMessage.objects.filter(reply_to=item_id).exists()

        last = before[-1]["id"]
        with client.stream("GET", url, headers={**headers, "Last-Event-ID": last}) as again:
            assert again.status_code == 200, again.read()
            after, ended = read_events(again, lambda evs: evs[-1]["event"] == "done")
        resumed_in = clock() - killed_at

    events = before + after
    ids = [e["id"] for e in events]
    assert all(i is not None and i.startswith(f"{item_id}:") for i in ids), ids
    assert len(ids) == len(set(ids)), "an event came twice"
    assert [int(i.split(":")[1]) for i in ids] == list(range(len(ids))), "an event is missing"
    assert [e["event"] for e in events].count("done") == 1 and events[-1]["event"] == "done"
    done = events[-1]["data"]
    stored = ChatMessage.objects.filter(reply_to=item_id)
    assert stored.count() == 1, "one reply stored for the chat"
    assert done["reply"] == stored.get().content == REPLY

    deltas = [e for e in events if e["event"] == "delta"]
    runs = list(dict.fromkeys(d["data"]["run"] for d in deltas))
    assert len(runs) == 2, f"the killed run and the re-run: {runs}"
    assert all(d["data"]["run"] == runs[0] for d in before if d["event"] == "delta")
    final = [d["data"]["text"] for d in deltas if d["data"]["run"] == runs[-1]]
    assert "".join(final) == REPLY, "the last run's pieces are the reply"
    assert any(d["data"]["run"] == runs[-1] for d in after), "the re-run came on the resumed stream"
    missed = [d for d in after if d["event"] == "delta" and d["data"]["run"] == runs[0]]
    assert len(missed) >= 2, "the pieces the killed run wrote after the last one read are replayed"

    item = MailboxItem.objects.get(id=item_id)
    assert item.status == "completed" and item.marks.get("crashes") == 1
    report(
        f"FAULTS 15 chat-stream-resume-after-kill: victim={victim} events={len(events)} "
        f"pieces_read_before_kill={sum(e['event'] == 'delta' for e in before)} replayed={len(missed)} runs=2 "
        f"resumed_to_done={resumed_in:.1f}s total={clock():.1f}s"
    )
