"""Imports the modules whose offline-brain plans register themselves with
``markus.llm.offline.register`` (one module per area, so each keeps its own plans)."""
