"""A chat message's role is one of three (the person, the agent, the system's activity
lines): model validation refuses any other, so a misspelt role cannot reach the chat page
or the model's history."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from markus.agents.models import Agent, ChatMessage
from markus.agents.services import main_session


def test_the_roles_are_user_assistant_and_system() -> None:
    assert sorted(ChatMessage.Role) == ["assistant", "system", "user"]


@pytest.mark.django_db
def test_a_message_with_an_unknown_role_is_refused(agent: Agent) -> None:
    message = ChatMessage(session=main_session(agent.id), role="robot", content="beep")
    with pytest.raises(ValidationError) as refused:
        message.full_clean()
    assert "role" in refused.value.message_dict


@pytest.mark.django_db
def test_a_message_with_a_known_role_is_accepted(agent: Agent) -> None:
    ChatMessage(session=main_session(agent.id), role=ChatMessage.Role.ASSISTANT, content="hi").full_clean()
