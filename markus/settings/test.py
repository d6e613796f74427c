"""Settings for the test suite: a file-backed SQLite test database (worker threads and
live servers need a real file), fast hashing, short loop timings."""
from __future__ import annotations

from . import *  # noqa: F403
from . import DATABASES, DATA_DIR, MARKUS

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
MARKUS.update({"COALESCE_WINDOW_MS": 20, "PREEMPT_RESUME_DELAY_S": 0.2})
