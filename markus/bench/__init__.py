"""Benchmarks run by ``manage.py bench``: each module ``markus/bench/<suite>.py`` has
``run(stdout, options) -> list[Figure]`` (see :mod:`markus.bench.report`).

``SUITES`` is what ``bench all`` runs, in this order; ``POSTGRESQL_ONLY`` suites run in
``bench all`` only when the configured database is PostgreSQL (and on their own name).
"""

SUITES: list[str] = [
    "mailbox",
    "attention",
    "wakeup",
    "agentbus",
    "timeline",
    "websocket",
    "memory",
    "prompts",
    "scale",
    "asgi",
    "walk",
]
POSTGRESQL_ONLY: list[str] = ["peers"]
