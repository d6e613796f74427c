"""The registry is the one place mailbox type literals live."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import mailbox
from mailbox.models import MailboxItem
from mailbox.registry import MAILBOX_TYPE_REGISTRY, Category, MailboxType, descriptor, types_in_category

ROOT = Path(__file__).resolve().parent.parent
# An LLM tool that shares its spelling with a type says so: its name must not follow a
# rename of the type (saved sessions call it by name).
NOT_A_TYPE = "# a tool name, not a mailbox type"
SKIP_DIRS = {"tests", "migrations", ".venv", "var", ".git", "node_modules", "__pycache__"}


def test_import_mailbox_is_ours_not_the_stdlib_one():
    assert getattr(mailbox, "MARKUS_MAILBOX_APP", False) is True
    assert Path(mailbox.__file__).resolve().parent == ROOT / "mailbox"
    assert not hasattr(mailbox, "Maildir")  # the stdlib module's classes are not reachable
    assert sys.modules["mailbox"] is mailbox


def test_registry_has_the_fifteen_types_with_every_descriptor_field():
    assert len(MAILBOX_TYPE_REGISTRY) == 15  # the seed's thirteen, reminder and callback_result
    for d in MAILBOX_TYPE_REGISTRY.values():
        assert d.label and d.icon and d.category in Category
        assert 0 <= d.default_priority <= 4
        assert isinstance(d.creates_activity, bool) and isinstance(d.invokes_llm, bool)
    assert descriptor("human_chat").default_priority == 0
    assert descriptor("memory_consolidation").default_priority == 4
    assert sorted(types_in_category("interaction")) == ["a2a_message", "human_chat", "mention"]


def test_model_choices_are_derived_from_the_registry():
    field = MailboxItem._meta.get_field("source_type")
    assert [value for value, _ in field.choices] == [t.value for t in MailboxType]
    assert dict(field.choices)["review_request"] == "Review Request"


def _source_files():
    for path in ROOT.rglob("*"):
        if path.suffix not in {".py", ".html", ".js", ".txt"} or not path.is_file():
            continue
        rel = path.relative_to(ROOT)
        if set(rel.parts) & SKIP_DIRS or rel.as_posix() == "requirements.txt":
            continue
        yield rel, path


def test_no_mailbox_type_literal_outside_the_registry_module():
    literals = [t.value for t in MailboxType]
    alternatives = "|".join(literals)
    pattern = re.compile(rf"""(['"])({alternatives})\1""")
    offenders = []
    for rel, path in _source_files():
        if rel.as_posix() == "mailbox/registry.py":
            continue
        for lineno, line in enumerate(path.read_text(errors="ignore").splitlines(), 1):
            if pattern.search(line) and not line.rstrip().endswith(NOT_A_TYPE):
                offenders.append(f"{rel}:{lineno}: {line.strip()}")
    assert offenders == [], "type literals outside mailbox/registry.py:\n" + "\n".join(offenders)
