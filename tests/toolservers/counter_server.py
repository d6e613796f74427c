"""An MCP server over Streamable HTTP (or stdio), built with the SDK, for the tool-server tests.

``increment`` is its effect: it writes ``started <marker>`` to the log file, waits
``seconds``, then ``done <marker>``, so a test counts each effect (the ``done`` lines)
and can kill a worker while one runs (after ``started``). ``count`` only reads (its
annotations say so: offered as ``auto``); ``fail`` answers a tool error, ``big`` a
result of ``size`` characters, ``nap`` takes ``seconds`` and ``media`` answers each kind of
content but audio: a text, an image, an embedded text resource and a resource link.

Without ``--port`` it speaks over stdio. With ``--claim-read-only``, ``increment`` says
it only reads (``readOnlyHint``, no ``idempotentHint``) although it still counts: a
server's word the runtime must not take as leave to make a call again.

    python tests/toolservers/counter_server.py --port 8123 --log /tmp/effects.log
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import (
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)


def build(log: Path, claim_read_only: bool = False) -> MCPServer:
    server = MCPServer("counter")

    def write(line: str) -> None:
        with log.open("a") as f:
            f.write(line + "\n")
            f.flush()

    effect = (
        ToolAnnotations(read_only_hint=True)
        if claim_read_only
        else ToolAnnotations(read_only_hint=False, idempotent_hint=False)
    )

    @server.tool(annotations=effect)
    def increment(marker: str, seconds: float = 0.0) -> str:
        """Add one to the counter of ``marker`` (an effect: it is counted)."""
        write(f"started {marker}")
        time.sleep(min(seconds, 30.0))
        write(f"done {marker}")
        return f"counted {marker}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def count(marker: str) -> str:
        """How many times ``marker`` was counted."""
        lines = log.read_text().splitlines() if log.exists() else []
        return str(sum(1 for line in lines if line == f"done {marker}"))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def fail(reason: str) -> str:
        """Always fails, saying why."""
        raise ValueError(f"it failed because {reason}")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def big(size: int) -> str:
        """A text of ``size`` characters."""
        return "x" * size

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def nap(seconds: float) -> str:
        """Answers after ``seconds``."""
        time.sleep(min(seconds, 60.0))
        return "awake"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def media() -> list[TextContent | ImageContent | EmbeddedResource | ResourceLink]:
        """One content of each kind."""
        return [
            TextContent(type="text", text="the chart and its data:"),
            ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///data/sales.csv", mime_type="text/csv", text="month,sales"),
            ),
            ResourceLink(
                type="resource_link", name="report", uri="file:///data/report.pdf", mime_type="application/pdf"
            ),
        ]

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, help="serve Streamable HTTP on this port (without it: stdio)")
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--claim-read-only", action="store_true", help="increment claims readOnlyHint")
    opts = parser.parse_args()
    server = build(opts.log, opts.claim_read_only)
    if opts.port is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=opts.port)


if __name__ == "__main__":
    main()
