"""What a wake-up carries, and when a woken wait may answer from it alone."""

from __future__ import annotations

from agentbus import wakeup
from agentbus.cursors import encode_cursor
from agentbus.waiting import messages_carried
from agentbus.wakeup import Wake


def message(n: int) -> dict:
    return {"streamId": "s", "sequence": n, "sender": "max", "topic": "t", "payload": {"n": n}, "createdAt": "x"}


def test_a_wake_up_is_answered_from_only_when_it_follows_the_position_without_a_gap():
    wakes = [Wake(11, message(11)), Wake(12, message(12)), Wake(14, message(14))]
    carried = messages_carried("eve", 10, wakes, limit=100)
    assert carried is not None
    assert [m["sequence"] for m in carried["messages"]] == [11, 12]  # 13 may be someone's: stop there
    assert carried["position"] == 12 and carried["next_cursor"] == encode_cursor("eve", 12)
    assert messages_carried("eve", 10, [Wake(12, message(12))], limit=100) is None  # 11 unknown
    assert messages_carried("eve", 10, [Wake()], limit=100) is None  # a close, a reconnect
    assert messages_carried("eve", 10, [Wake(11, None)], limit=100) is None  # too large to carry
    assert messages_carried("eve", 10, [], limit=100) is None  # the poll
    assert [m["sequence"] for m in messages_carried("eve", 10, wakes, limit=1)["messages"]] == [11]


def test_a_wake_up_carries_only_what_reads_back_the_same():
    small = {"text": "hi", "n": 3, "x": 0.5}
    assert wakeup.decode_wake(wakeup.encode_wake(7, small)) == Wake(7, small)
    assert wakeup.decode_wake(wakeup.encode_wake(7, {"text": "x" * 10_000})) == Wake(7, None)
    assert wakeup.decode_wake(wakeup.encode_wake(7, {"big": 1e20})) == Wake(7, None)  # jsonb makes it an int
    assert wakeup.decode_wake(wakeup.encode_wake()) == Wake()
    assert wakeup.decode_wake(b"\xff not json") == Wake()


def test_the_subscriber_reassembles_replies_split_anywhere():
    from agentbus.redis_wire import Subscriber, command

    expected = [[b"subscribe", b"ch:eve", 1], [b"message", b"ch:eve", b'{"p":7,"m":{}}'], [b"pong", b""]]
    wire = (
        b"*3\r\n$9\r\nsubscribe\r\n$6\r\nch:eve\r\n:1\r\n"
        + command(b"message", b"ch:eve", b'{"p":7,"m":{}}')
        + command(b"pong", b"")
    )
    for cut in range(1, len(wire)):
        got: list = []
        protocol = Subscriber(got.append, lambda: None)
        protocol.data_received(wire[:cut])
        protocol.data_received(wire[cut:])
        assert got == expected, cut
