"""The loop's transactions are its phases: few places open a fenced transaction, each a
phase of the loop (begin, tidy the queue, recover, a turn's writes, settle, …), not one
per writer. Counted with ``ast`` over ``attention/``: every call of ``fenced`` outside
its own definition. A new place is a new phase: it should be rare and named here."""

from __future__ import annotations

import ast
from pathlib import Path

ATTENTION = Path(__file__).resolve().parents[2] / "attention"
MOST = 10


def places() -> list[str]:
    found: list[str] = []
    for path in sorted(ATTENTION.glob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name == "fenced":
                    found.append(f"{path.stem}:{node.lineno}")
    return found


def test_at_most_ten_places_open_a_fenced_transaction() -> None:
    found = places()
    assert found, "the counter found no call of fenced: it counts nothing"
    assert len(found) <= MOST, f"{len(found)} places open a fenced transaction (at most {MOST}): {found}"
