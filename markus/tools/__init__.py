"""Agent tools: each has a JSON schema, a permission check and an error the LLM can read.

Tool modules register themselves with ``@tool``; ``load_tools()`` imports them.
"""
from __future__ import annotations

from .registry import TOOLS, ToolContext, ToolError, execute_tool, load_tools, schemas_for, tool

__all__ = ["TOOLS", "ToolContext", "ToolError", "execute_tool", "load_tools", "schemas_for", "tool"]
