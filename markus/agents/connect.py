"""Ready-made configuration for an outside agent's harness, as its connect page and
``manage.py agent connect`` print it: Claude Code (its MCP server and its hooks), any MCP
client, the stdio relay, the A2A directory and the agent's own A2A card.

The token is written in only where it was just issued (created or rotated): it is stored
as a hash and cannot be read back, so every later view shows ``TOKEN_PLACEHOLDER``."""

from __future__ import annotations

import json
import shlex

MCP_SERVER_NAME = "markus"  # the name the harness lists the server under
TOKEN_PLACEHOLDER = "<agent token>"
# Where the hub serves agentbus/hooks/claude_code.py (one file, standard library only),
# and where the settings expect it on the machine Claude Code runs on.
HOOK_DOWNLOAD_PATH = "/hooks/claude_code.py"
HOOK_PATH = "~/.claude/hooks/markus_claude_code.py"
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "Stop")


def mcp_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/mcp/"


def snippets(*, base_url: str, agent_id: str, token: str | None) -> dict[str, str]:
    """Each piece of configuration by name, as text to paste. A token is URL-safe base64
    (``services.new_agent_token``): it needs no escaping inside double quotes."""
    base = base_url.rstrip("/")
    url = mcp_url(base)
    secret = token or TOKEN_PLACEHOLDER
    header = f"Authorization: Bearer {secret}"
    mcp_json = {
        "mcpServers": {MCP_SERVER_NAME: {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {secret}"}}}
    }
    env = {"MARKUS_HUB_URL": base, "MARKUS_TOKEN": secret, "MARKUS_AGENT_ID": agent_id}
    return {
        "claudeMcpAdd": f'claude mcp add --transport http {MCP_SERVER_NAME} {shlex.quote(url)} --header "{header}"',
        "mcpJson": json.dumps(mcp_json, indent=2),
        "hookInstall": f"mkdir -p ~/.claude/hooks && curl -fsS {shlex.quote(base + HOOK_DOWNLOAD_PATH)} -o {HOOK_PATH}",
        "claudeSettings": hook_settings(env),
        "mcpUrl": url,
        "mcpHeader": header,
        "stdioRelay": f'python manage.py mcp --hub {shlex.quote(base)} --token "{secret}"',
        "a2aDirectory": f"{base}/.well-known/agent-card.json",
        "a2aCard": f"{base}/a2a/{agent_id}/.well-known/agent-card.json",
    }


def hook_settings(env: dict[str, str]) -> str:
    """Claude Code's settings for the hooks, as the README writes them: the environment
    one variable a line, each event's hook on one line."""
    hook = json.dumps([{"hooks": [{"type": "command", "command": f"python3 {HOOK_PATH}"}]}])
    events = ",\n".join(f"    {json.dumps(event)}: {hook}" for event in HOOK_EVENTS)
    env_lines = json.dumps(env, indent=2).replace("\n", "\n  ")
    return f'{{\n  "env": {env_lines},\n  "hooks": {{\n{events}\n  }}\n}}'
