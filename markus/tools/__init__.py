"""Agent tools: each has a JSON schema, a permission check and an error the LLM can read.

Tool modules register themselves with ``attention.toolbox.tool``; the loop imports them
(by name, from ``settings.MARKUS["TOOL_MODULES"]``) the first time it offers tools.
"""
