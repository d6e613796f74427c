"""Settings for the test suite: a file-backed SQLite test database (worker threads and
live servers need a real file), fast hashing, short loop timings."""

from __future__ import annotations

import os

from . import *  # noqa: F403
from . import CHANNEL_LAYERS, DATA_DIR, DATABASES, MARKUS, REDIS_URL

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # One file per test run (parallel runs must not share it); subprocesses that need
    # the same test database get MARKUS_TEST_DB_NAME from their parent.
    _name = os.environ.setdefault("MARKUS_TEST_DB_NAME", f"test-{os.getpid()}.sqlite3")
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / _name)}
else:
    _name = os.environ.setdefault("MARKUS_TEST_DB_NAME", f"test_markus_{os.getpid()}")
    DATABASES["default"]["TEST"] = {"NAME": _name}
MARKUS.update({"COALESCE_WINDOW_MS": 20, "PREEMPT_RESUME_DELAY_S": 0.2})
MARKUS.update({"WAKE_ON_ENQUEUE": False})
# The suite starts and stops many in-process workers: each task's connection is closed
# after it (a kept one would outlive its worker thread and hold the test database).
WORKER_CONN_MAX_AGE = 0
# A provider error is tried again at once in tests (the back-off has its own tests).
MARKUS.update({"LLM_BACKOFF_S": 0.0})
if REDIS_URL:
    # Test runs on one machine share its Redis: each run (and the servers and workers it
    # starts, which inherit the variable) gets its own channel-layer and queue namespace.
    _namespace = os.environ.setdefault("MARKUS_REDIS_NAMESPACE", f"test{os.getpid()}")
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = _namespace
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": f"{_namespace}:"}
