"""Imports the modules whose offline-brain plans register themselves with
``markus.llm.offline.register`` (one module per area, so each keeps its own plans)."""

from . import (
    offline_deliberation,  # noqa: F401  (triage and deliberation)
    offline_memory,  # noqa: F401  (the dream cycle)
    offline_reports,  # noqa: F401  (daily reports, reminders)
)
