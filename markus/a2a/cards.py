"""Agent cards: each running agent's (``/a2a/{id}/.well-known/agent-card.json``) and the
directory of the agents a caller reaches (``/.well-known/agent-card.json``).

An agent's card names it, its role and team, the JSON-RPC endpoint, streaming, the
bearer security scheme (an agent's token or a user's API token), and its skills: the
scenarios of the attention loop (``attention.scenarios``) it runs for the work that
reaches it, a message through this door (a person's chat, another agent's message) or a
task filed in the API. An outside agent (``kind`` external) runs no loop: its card
says what reaches its bus inbox and how it answers; a person reaches it through this
door as a chat, an agent over the AgentBus (``bus_request``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

from attention import scenarios
from markus.agents.models import Agent

from .auth import SCHEME

CARD_VERSION = "1.0.0"
TEXT = ["text/plain"]


@dataclass(frozen=True)
class Skill:
    scenario: str  # the scenario of attention.scenarios it runs (an outside agent: the work it takes)
    name: str
    description: str
    tags: tuple[str, ...]
    examples: tuple[str, ...] = ()


SKILLS = [
    Skill(
        scenarios.CHAT,
        "Chat",
        "A person's message (sent with a user's token) becomes a chat in the agent's mailbox; the agent's "
        "answer is the task's reply.",
        ("chat", "message"),
        ("What are you working on?",),
    ),
    Skill(
        scenarios.A2A,
        "Answer another agent",
        "An agent's message (sent with its own token) goes over the AgentBus into the agent's mailbox; its "
        "answer on the bus is the task's reply. It may ask a person for approval first (input-required).",
        ("agents", "message"),
        ("Can you review the migration plan?",),
    ),
    Skill(
        scenarios.TASK_EXECUTION,
        "Execute tasks",
        "Works on the tasks assigned to it (POST /api/tasks/ with assigneeId), commenting as it goes, and "
        "submits them for review.",
        ("tasks",),
    ),
    Skill(
        scenarios.REVIEW,
        "Review tasks",
        "Reviews the tasks it is the reviewer of: comments, completes them or sends them back.",
        ("tasks", "review"),
    ),
    Skill(
        scenarios.COMMENT_RESPONSE,
        "Answer comments",
        "Answers comments on its tasks and requirements.",
        ("tasks", "comments"),
    ),
]


# An outside agent's skills: what reaches its bus inbox, and how it answers there.
OUTSIDE_SKILLS = [
    Skill(
        scenarios.CHAT,
        "Chat",
        "A person's message (sent with a user's token) becomes a chat delivered to the agent's bus inbox; the "
        "agent's answer in that chat (bus_reply) is the task's reply. Agents reach it over the AgentBus "
        "(bus_request), not through this door.",
        ("chat", "message"),
        ("Which branch are you on?",),
    ),
    Skill(
        scenarios.TASK_EXECUTION,
        "Execute tasks",
        "The tasks assigned to it (POST /api/tasks/ with assigneeId), with their comments, arrive in its bus "
        "inbox; it comments and submits them for review.",
        ("tasks",),
    ),
    Skill(
        scenarios.REVIEW,
        "Review tasks",
        "Review requests for the tasks it is the reviewer of arrive in its bus inbox; it approves them or "
        "requests changes with a comment (task_review).",
        ("tasks", "review"),
    ),
]
OUTSIDE_NOTE = " (outside Markus: a person reaches it as a chat)"  # its line in the directory
KIND_SKILLS = {Agent.Kind.INTERNAL: SKILLS, Agent.Kind.EXTERNAL: OUTSIDE_SKILLS}
KIND_DESCRIPTIONS = {
    Agent.Kind.INTERNAL: "an agent of Markus{team}. Each message sent here becomes a task that follows the "
    "agent's mailbox item: submitted, working, input-required while a person's approval is awaited, then "
    "completed with the agent's reply, failed or canceled.",
    Agent.Kind.EXTERNAL: "an agent outside Markus{team} (a coding agent or another harness), connected over "
    "the AgentBus. A person's message sent here becomes a chat delivered to its bus inbox: the task is "
    "submitted, working while the message waits for its answer, then completed with its answer in that "
    "chat. Agents reach it over the AgentBus (bus_request), not through this door.",
}


def _security() -> dict[str, Any]:
    scheme = HTTPAuthSecurityScheme(
        scheme="Bearer", description="An agent's token (acts as that agent) or a user's API token"
    )
    return {
        "security_schemes": {SCHEME: SecurityScheme(http_auth_security_scheme=scheme)},
        "security_requirements": [SecurityRequirement(schemes={SCHEME: StringList()})],
    }


def endpoint_url(base: str, agent: Agent) -> str:
    return f"{base}a2a/{agent.id}/"


def card_url(base: str, agent: Agent) -> str:
    return f"{endpoint_url(base, agent)}.well-known/agent-card.json"


def agent_card(agent: Agent, base: str) -> AgentCard:
    """``base``: the server's root URL, with its trailing slash."""
    team = f" of team {agent.team.name}" if agent.team is not None else ""
    role = f", {agent.role}" if agent.role else ""
    return AgentCard(
        name=agent.name,
        description=f"{agent.name}{role}: " + KIND_DESCRIPTIONS[Agent.Kind(agent.kind)].format(team=team),
        supported_interfaces=[
            AgentInterface(
                url=endpoint_url(base, agent),
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        provider=AgentProvider(organization="Markus", url=base),
        version=CARD_VERSION,
        documentation_url=f"{base}api/docs/",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=False),
        default_input_modes=TEXT,
        default_output_modes=TEXT,
        skills=[
            AgentSkill(
                id=s.scenario,
                name=s.name,
                description=s.description,
                tags=list(s.tags),
                examples=list(s.examples),
                input_modes=TEXT,
                output_modes=TEXT,
            )
            for s in KIND_SKILLS[Agent.Kind(agent.kind)]
        ],
        **_security(),
    )


def agent_card_json(agent: Agent, base: str) -> dict[str, Any]:
    data: dict[str, Any] = agent_card_to_dict(agent_card(agent, base))
    return data


def directory_json(agents: list[Agent], base: str) -> dict[str, Any]:
    """The directory card: not an agent (no endpoint of its own); each skill is one agent
    the caller reaches, with the URL of its card."""
    card = AgentCard(
        name="Markus",
        description="The agents of this Markus server that you reach, one skill each; each agent's own card "
        "(its endpoint, skills and security) is at the URL its skill names.",
        provider=AgentProvider(organization="Markus", url=base),
        version=CARD_VERSION,
        documentation_url=f"{base}api/docs/",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=TEXT,
        default_output_modes=TEXT,
        skills=[
            AgentSkill(
                id=a.id,
                name=a.name,
                description=f"{a.role or 'agent'}{OUTSIDE_NOTE if a.kind == Agent.Kind.EXTERNAL else ''}; "
                f"card: {card_url(base, a)}",
                tags=["agent", *([a.role] if a.role else [])],
            )
            for a in agents
        ],
        **_security(),
    )
    data: dict[str, Any] = MessageToDict(card)
    return data
