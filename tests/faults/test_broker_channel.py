"""The broker channel under celery's recovery from a lost Redis, without a worker
process: after Redis goes away with a message unacked (acks_late) and a BRPOP in
flight, celery's consumer ``collect()``s the connection and then ``close()``s it
(celery.worker.consumer.Consumer.on_connection_error_after_connected), and the task
still running acks its message later. Each of these may fail with a connection error
(the consumer reconnects, the ack is logged), never with another error: kombu's own
Redis channel raised AttributeError there, the worker's "Unrecoverable error" that
stopped it (tests/faults/test_redis_down.py shows the whole worker)."""

from __future__ import annotations

import contextlib
import logging
import socket

import pytest
from kombu import Exchange, Message, Queue

from .harness import RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.faults]


def test_a_channel_closed_after_its_broker_went_away_raises_only_connection_errors(tmp_path):
    from markus.celery import app

    assert app.conf.broker_transport == "markus.celery:RedisTransport"
    redis = RedisServer(tmp_path)
    redis.start()
    queue = Queue("faults-broker", Exchange("faults-broker", type="direct"), "faults-broker")
    # Like the worker's remote-control (pidbox) queue: a fanout queue, deleted on close.
    fanout = Queue("faults-pidbox", Exchange("faults-fanout", type="fanout"), auto_delete=True, durable=False)
    conn = app.connection_for_read(url=redis.url)
    errors = conn.connection_errors
    try:
        conn.ensure_connection(max_retries=3)
        with conn.Producer() as producer:
            producer.publish({"n": 1}, exchange=queue.exchange, routing_key="faults-broker", declare=[queue])
        received: list[Message] = []
        with conn.Consumer([queue, fanout], callbacks=[lambda body, message: received.append(message)]):
            conn.drain_events(timeout=5)  # the message, left unacked
            with contextlib.suppress(socket.timeout):
                conn.drain_events(timeout=0.2)  # ... and the next BRPOP stays in flight
        channel = conn.default_channel
        assert len(received) == 1 and channel.qos._delivered and channel._in_poll  # the worker's state
        redis.stop()

        # celery's consumer on a lost connection: collect() (errors ignored), then close().
        try:
            conn.collect(socket_timeout=1)
        except Exception:
            pass
        try:
            conn.close()
        except errors:
            pass  # what kombu.common.ignore_errors swallows: the consumer reconnects
        # The task that ran through the outage acks on the old channel: logged, not raised.
        received[0].ack_log_error(logging.getLogger(__name__), errors)
    finally:
        redis.stop()
