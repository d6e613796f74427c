"""A stream id a caller chooses: letters, digits and ``_ - . :``, at most 128, and not
made only of dots (``.`` and ``..`` are path segments in every URL that names the
stream). A bad one answers 400 naming the rule, and no stream is opened."""

from __future__ import annotations

import pytest

from .conftest import conversations

pytestmark = pytest.mark.django_db


def open_stream(persona, stream_id: str):
    body = {"sender": "eve", "recipient": "max", "streamId": stream_id}
    return persona.client().post("/api/agentbus/streams", body, format="json")


@pytest.mark.parametrize("stream_id", [".", "..", "...", "a/b", "x" * 129, ""])
def test_a_bad_stream_id_is_400_naming_the_rule(eve, max_, stream_id):
    response = open_stream(eve, stream_id)
    assert response.status_code == 400
    assert "streamId" in response.json()["detail"]
    assert not conversations().exists()


def test_an_id_of_only_dots_says_so(eve, max_):
    assert "only of dots" in open_stream(eve, "..").json()["detail"]


@pytest.mark.parametrize("stream_id", ["a.b", ".hidden", "v1..2", "team:review-1"])
def test_ids_with_dots_among_other_characters_are_taken(eve, max_, stream_id):
    assert open_stream(eve, stream_id).status_code == 201
    assert conversations().get().id == stream_id
