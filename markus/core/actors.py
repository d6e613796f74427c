"""Who is acting: a user, an agent, or the system itself (cascades, start-up)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

ActorKind = Literal["user", "agent", "system"]


class NamedAgent(Protocol):
    """What an actor reads of an agent (the kernel does not import the agents app)."""

    @property
    def id(self) -> str: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class Actor:
    """The author of a transition or a comment.

    ``id`` is the agent id, the user's primary key as a string, or ``"system"``.
    ``is_staff`` only matters for users (staff see everything).
    """

    kind: ActorKind
    id: str
    name: str
    is_staff: bool = False

    @classmethod
    def for_user(cls, user: User | AnonymousUser) -> Actor:
        return cls("user", str(user.pk), user.get_username(), bool(user.is_staff))

    @classmethod
    def for_agent(cls, agent: NamedAgent) -> Actor:
        return cls("agent", agent.id, agent.name)

    @classmethod
    def system(cls) -> Actor:
        return cls("system", "system", "system")

    @property
    def is_user(self) -> bool:
        return self.kind == "user"

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"

    @property
    def user_id(self) -> int | None:
        return int(self.id) if self.is_user else None

    @property
    def agent_id(self) -> str | None:
        return self.id if self.is_agent else None

    def sender_metadata(self) -> dict[str, str]:
        """``senderId / senderName / senderRole`` for mailbox item metadata."""
        return {"senderId": self.id, "senderName": self.name, "senderRole": self.kind}
