"""A frame daphne writes to a socket costs the write, not a debug line nobody reads:
autobahn formats a coloured debug message (``hltype``/``hlval``, ``click.style``) on
every ``sendData``, logged or not. With the server's sockets patched
(``notifications.consumers.install_quiet_writes``) a frame and a pong are written as
before, byte for byte, and counted in the traffic stats, without that formatting;
with debug logging switched on the line is still written."""

from __future__ import annotations

from unittest import mock

import autobahn.websocket.protocol as autobahn_protocol
import pytest
from twisted.internet.testing import StringTransport

from notifications.consumers import install_quiet_writes


@pytest.fixture
def socket():
    from daphne.ws_protocol import WebSocketFactory

    install_quiet_writes()
    protocol = WebSocketFactory(server_class=None).buildProtocol(None)
    protocol.transport = StringTransport()
    protocol._connectionMade()
    protocol.state = protocol.STATE_OPEN
    return protocol


def test_a_frame_is_written_without_formatting_a_debug_line(socket):
    formatted = mock.Mock(side_effect=autobahn_protocol.hltype)
    with mock.patch.object(autobahn_protocol, "hltype", formatted):
        socket.sendMessage(b"hello")
        socket.sendMessage(b"x" * 300)
        socket.sendPong(b"p")
    assert formatted.call_count == 0
    assert socket.transport.value() == (
        b"\x81\x05hello" + b"\x81\x7e\x01\x2c" + b"x" * 300 + b"\x8a\x01p"  # text, text (16-bit length), pong
    )
    assert socket.trafficStats.outgoingOctetsWireLevel == len(socket.transport.value())


def test_with_debug_logging_on_every_write_is_still_logged(socket):
    level = socket.log._log_level  # the logger is the class's: put back for the other tests
    socket.log.set_log_level("debug")
    formatted = mock.Mock(side_effect=autobahn_protocol.hltype)
    try:
        with mock.patch.object(autobahn_protocol, "hltype", formatted):
            socket.sendMessage(b"hello")
    finally:
        socket.log.set_log_level(level, keep=False)
    assert formatted.call_count == 1
    assert socket.transport.value() == b"\x81\x05hello"
