"""Full-text search, by database: on SQLite FTS5 tables over the observations and the
sections (external content, porter stemming), kept in step by triggers on every insert,
update and delete, whoever writes (a service, the admin, a cascade); on PostgreSQL GIN
indexes over the same ``to_tsvector('english', …)`` expressions the searches use."""

from __future__ import annotations

from typing import Any

from django.db import migrations

TOKENIZE = "tokenize='porter unicode61 remove_diacritics 2'"


def _fts(table: str, columns: list[str]) -> list[str]:
    fts = f"{table}_fts"
    cols = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    return [
        f"CREATE VIRTUAL TABLE {fts} USING fts5({cols}, content='{table}', content_rowid='id', {TOKENIZE})",
        f"CREATE TRIGGER {table}_fts_ai AFTER INSERT ON {table} BEGIN "
        f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.id, {new}); END",
        f"CREATE TRIGGER {table}_fts_ad AFTER DELETE ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.id, {old}); END",
        f"CREATE TRIGGER {table}_fts_au AFTER UPDATE ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.id, {old}); "
        f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.id, {new}); END",
        f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
    ]


SQLITE_FORWARD = _fts("memory_observations", ["content"]) + _fts("memory_sections", ["title", "content"])
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {t}_fts_{k}"
    for t in ("memory_observations", "memory_sections")
    for k in ("ai", "ad", "au")
] + ["DROP TABLE IF EXISTS memory_observations_fts", "DROP TABLE IF EXISTS memory_sections_fts"]

POSTGRES_FORWARD = [
    "CREATE INDEX memory_obs_fts ON memory_observations "
    "USING gin (to_tsvector('english'::regconfig, COALESCE(content, '')))",
    "CREATE INDEX memory_sections_fts ON memory_sections "
    "USING gin (to_tsvector('english'::regconfig, COALESCE(title, '') || ' ' || COALESCE(content, '')))",
]
POSTGRES_BACKWARD = ["DROP INDEX IF EXISTS memory_obs_fts", "DROP INDEX IF EXISTS memory_sections_fts"]


def _run(statements: dict[str, list[str]]) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
