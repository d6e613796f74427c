"""The retention policy, read from ``settings.MARKUS["RETENTION"]``: after how many days
each kind of row may go (0 or less: kept for ever) and the batch size of a delete."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

DEFAULTS: dict[str, Any] = {
    "ENABLED": True,
    "ITEMS_DAYS": 30.0,
    "ACTIVITIES_DAYS": 30.0,
    "SESSIONS_DAYS": 30.0,
    "CHUNKS_DAYS": 7.0,
    "OUTBOX_DAYS": 7.0,
    "AUDIT_DAYS": 90.0,
    "BATCH_SIZE": 1000,
}


@dataclass(frozen=True)
class Policy:
    enabled: bool
    items_days: float
    activities_days: float
    sessions_days: float
    chunks_days: float
    outbox_days: float
    audit_days: float
    batch_size: int

    @classmethod
    def from_settings(cls, **overrides: Any) -> Policy:
        """The policy in settings (missing keys take ``DEFAULTS``), with ``overrides``
        (lower-case field names, e.g. ``batch_size=10``) on top."""
        conf = {**DEFAULTS, **settings.MARKUS.get("RETENTION", {})}
        fields = {key.lower(): value for key, value in conf.items() if key.lower() in cls.__dataclass_fields__}
        fields.update(overrides)
        policy = cls(**fields)
        if int(policy.batch_size) < 1:
            raise ValueError("RETENTION BATCH_SIZE must be at least 1")
        return policy

    def cutoff(self, days: float, now: datetime) -> datetime | None:
        """Rows older than this may go; None: this kind is kept for ever."""
        return now - timedelta(days=float(days)) if float(days) > 0 else None
