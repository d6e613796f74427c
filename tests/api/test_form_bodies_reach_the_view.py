"""A form body is Django's to read, on the real server too: daphne's Twisted request
parsed every ``multipart/form-data`` POST body itself (its ``args``, which daphne never
reads) and answered one it could not parse with a bare 400 and no body, before the
application saw it (schemathesis found it: an empty multipart body to nine operations).
Now the body reaches the view, which answers bad input in the API's shape."""

from __future__ import annotations

import pytest

from .test_body_limits import Answer, alice_token, exchange, server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)

BOUNDARY = "c637e12e2b1a998d80d1b087531af51c"
FORM = f"multipart/form-data; boundary={BOUNDARY}"


def post_form(server, token: str, path: str, body: bytes) -> Answer:
    headers = {"Content-Type": FORM, "Content-Length": str(len(body)), "Authorization": f"Token {token}"}
    return exchange(server, path, headers=headers, body=[body])


@pytest.mark.parametrize(
    "path", ["/api/agentbus/streams/", "/api/agents/ada/sessions", "/api/agents/ada/agentbus/drain/"]
)
def test_an_empty_multipart_body_is_answered_by_the_view_in_the_apis_shape(server, agent, alice_token, path):
    answer = post_form(server, alice_token, path, f"--{BOUNDARY}--\r\n".encode())
    assert answer.body, f"{answer.status} with no body"
    assert answer.status < 500 and answer.json(), answer.body  # the view's own answer (a session: 201)


def test_a_multipart_form_still_reaches_the_view(server, agent, alice_token):
    body = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="sender"\r\n\r\nada\r\n'
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="recipient"\r\n\r\nada\r\n--{BOUNDARY}--\r\n'
    ).encode()
    answer = post_form(server, alice_token, "/api/agentbus/streams/", body)
    # The view read both fields: its own refusal of a stream from ada to ada.
    assert answer.status == 400 and answer.json()["detail"] == "an agent cannot open a stream to itself"
