"""Writes to an agent's long-term memory: save an observation, write a section of
MEMORY.md, replace the whole document, apply a dream's consolidation.

The full-text indexes follow every write on their own (triggers on SQLite, expression
indexes on PostgreSQL). The writers of one agent's document are serialised by a lock
on it (``_lock``), so two writes cannot together pass the size limits."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Max, Sum
from django.utils import timezone

from mailbox.services import mailbox_lock_group
from markus.core.errors import MarkusError

from . import selectors
from .document import (
    DOCUMENT_LIMIT,
    SECTION_LIMIT,
    MemoryTooLarge,
    Section,
    check_sections,
    check_title,
    document_chars,
    fit_document,
    fit_section,
    newlines,
    normalized,
    parse,
)
from .models import MemorySection, MemoryState, Observation

log = logging.getLogger(__name__)

# An observation holds at most this many characters.
OBSERVATION_LIMIT = 1000
KIND_LIMIT = 32


def _lock(agent_id: str) -> None:
    """Serialise the writers of the agent's memory until the transaction ends."""
    mailbox_lock_group(agent_id, "memory", "document")


def memory_save(
    *, agent_id: str, content: str, kind: str = "note", mailbox_item_id: str = "", activity_id: str = ""
) -> Observation:
    text = content.strip()
    if not text:
        raise MarkusError("an observation must not be empty")
    if len(text) > OBSERVATION_LIMIT:
        raise MarkusError(f"an observation is at most {OBSERVATION_LIMIT} characters (this one has {len(text)})")
    kind = (kind or "note").strip()[:KIND_LIMIT] or "note"
    now = timezone.now()
    return Observation.objects.create(
        agent_id=agent_id,
        content=text,
        kind=kind,
        mailbox_item_id=mailbox_item_id or "",
        activity_id=activity_id or "",
        created_at=now,
        updated_at=now,
    )


# ---------------------------------------------------------------------------- MEMORY.md

MODES = ("replace", "append", "delete")


@transaction.atomic
def section_write(*, agent_id: str, title: str, content: str = "", mode: str = "replace") -> dict[str, Any]:
    """Replace, append to or delete one section (created at the end when missing).
    MarkusError when the section would go over SECTION_LIMIT, MemoryTooLarge when the
    document would go over DOCUMENT_LIMIT: nothing is written then."""
    if mode not in MODES:
        raise MarkusError(f"mode must be one of {', '.join(MODES)}")
    title = check_title(title)
    _lock(agent_id)
    rows = list(selectors.sections(agent_id))
    row = next((r for r in rows if r.title.casefold() == title.casefold()), None)
    if mode == "delete":
        if row is None:
            raise MarkusError(f"there is no section {title!r}")
        row.delete()
        return {"section": row.title, "deleted": True, "documentChars": document_chars(_sections(rows, skip=row))}
    text = newlines(content).strip("\n").rstrip()
    if mode == "append" and row is not None and row.content.strip():
        text = f"{row.content.rstrip()}\n{text}"
    doc = [Section(r.title, text if r is row else r.content) for r in rows]
    if row is None:
        doc.append(Section(title, text))
    check_sections(doc)
    now = timezone.now()
    if row is None:
        position = max((r.position for r in rows), default=-1) + 1
        row = MemorySection.objects.create(
            agent_id=agent_id, title=title, content=text, position=position, updated_at=now
        )
    else:
        MemorySection.objects.filter(id=row.id).update(content=text, updated_at=now)
    return {"section": row.title, "chars": len(text), "documentChars": document_chars(doc)}


def _sections(rows: list[MemorySection], *, skip: MemorySection | None = None) -> list[Section]:
    return [Section(r.title, r.content) for r in rows if r is not skip]


@transaction.atomic
def document_replace(*, agent_id: str, markdown: str) -> list[Section]:
    """Make MEMORY.md the given markdown (sections by their ``## `` headings); 413
    (MemoryTooLarge) over DOCUMENT_LIMIT, 400 for a section over SECTION_LIMIT or a bad
    title. Sections keep their rows (and ids) by title. The document is measured as
    rendered from its sections (line endings made ``\\n``); text over twice the limit
    is refused before it is read."""
    if len(markdown) > 2 * DOCUMENT_LIMIT:
        raise MemoryTooLarge(len(newlines(markdown)))
    doc = parse(markdown)
    if (chars := document_chars(doc)) > DOCUMENT_LIMIT:
        raise MemoryTooLarge(chars)  # 413 for the whole before 400 for a section
    check_sections(doc)
    _lock(agent_id)
    _store(agent_id, doc)
    return doc


def _store(agent_id: str, doc: list[Section]) -> None:
    """Write ``doc`` as the agent's sections: changed rows updated, new ones created,
    missing ones deleted. Inside the caller's transaction, holding ``_lock``."""
    existing = {r.title.casefold(): r for r in selectors.sections(agent_id)}
    wanted = {s.title.casefold() for s in doc}
    MemorySection.objects.filter(id__in=[r.id for key, r in existing.items() if key not in wanted]).delete()
    now = timezone.now()
    for position, s in enumerate(doc):
        row = existing.get(s.title.casefold())
        if row is None:
            MemorySection.objects.create(
                agent_id=agent_id, title=s.title, content=s.content, position=position, updated_at=now
            )
        elif (row.title, row.content, row.position) != (s.title, s.content, position):
            MemorySection.objects.filter(id=row.id).update(
                title=s.title, content=s.content, position=position, updated_at=now
            )


# ---------------------------------------------------------------------------- consolidation


@dataclass
class Merge:
    ids: list[int]
    text: str


@dataclass
class Promote:
    section: str
    text: str


@dataclass
class Consolidation:
    remove: list[int] = field(default_factory=list)
    merge: list[Merge] = field(default_factory=list)
    promote: list[Promote] = field(default_factory=list)


@transaction.atomic
def consolidate(*, agent_id: str, plan: Consolidation, through: int | None = None) -> dict[str, Any]:
    """Apply a dream's result:

    1. remove the listed observations;
    2. merge each group into its oldest observation (the text given, the counts
       summed), the others deleted;
    3. promote each text into its MEMORY.md section (created at the end when missing;
       a line already there is not added twice);
    4. trim with the rules of ``document.fit_section`` (a section keeps its newest
       lines, SECTION_LIMIT) and ``document.fit_document`` (the longest section loses
       its oldest line until the whole is within DOCUMENT_LIMIT);
    5. mark the observations up to ``through`` (default: all of them) as dreamt over.

    Ids that are not the agent's observations (or are gone) are ignored and reported."""
    _lock(agent_id)
    ignored: list[int] = []
    latest = Observation.objects.filter(agent_id=agent_id).aggregate(m=Max("id"))["m"] or 0
    removed = _remove(agent_id, plan.remove, ignored)
    merged = sum(_merge(agent_id, m, ignored) for m in plan.merge)
    promoted, skipped, trimmed = _promote(agent_id, plan.promote)
    state, _ = MemoryState.objects.select_for_update().get_or_create(agent_id=agent_id)
    state.consolidated_through = max(state.consolidated_through, min(latest, through) if through else latest)
    state.consolidated_at = timezone.now()
    state.dreams += 1
    state.save()
    return {
        "removed": removed,
        "merged": merged,
        "promoted": promoted,
        "alreadyKnown": skipped,
        "trimmedChars": trimmed,
        "ignoredIds": sorted(set(ignored)),
        "documentChars": document_chars(selectors.document(agent_id)),
        "observationsLeft": Observation.objects.filter(agent_id=agent_id).count(),
    }


def _remove(agent_id: str, ids: list[int], ignored: list[int]) -> int:
    own = set(Observation.objects.filter(agent_id=agent_id, id__in=ids).values_list("id", flat=True))
    ignored += [i for i in ids if i not in own]
    Observation.objects.filter(id__in=own).delete()
    return len(own)


def _merge(agent_id: str, merge: Merge, ignored: list[int]) -> int:
    """Merge a group into its oldest observation; returns how many were folded in."""
    rows = list(Observation.objects.filter(agent_id=agent_id, id__in=merge.ids).order_by("id"))
    found = {r.id for r in rows}
    ignored += [i for i in merge.ids if i not in found]
    text = merge.text.strip()[:OBSERVATION_LIMIT]
    if not rows or not text:
        return 0
    keep, others = rows[0], rows[1:]
    total = Observation.objects.filter(id__in=found).aggregate(n=Sum("count"))["n"] or 1
    Observation.objects.filter(id__in=[o.id for o in others]).delete()
    Observation.objects.filter(id=keep.id).update(content=text, count=total, updated_at=timezone.now())
    return len(others)


def _promote(agent_id: str, promotions: list[Promote]) -> tuple[int, int, int]:
    """Append the texts to their sections, then trim; (promoted, already there, chars
    trimmed)."""
    if not promotions:
        return 0, 0, 0
    doc = selectors.document(agent_id)
    promoted = skipped = 0
    for p in promotions:
        title, text = check_title(p.section), newlines(p.text).strip()
        if not text:
            continue
        section = next((s for s in doc if s.title.casefold() == title.casefold()), None)
        if section is None:
            section = Section(title, "")
            doc.append(section)
        if normalized(text) in {normalized(line) for line in section.content.split("\n")}:
            skipped += 1
            continue
        section.content = f"{section.content.rstrip()}\n{text}".strip("\n")
        promoted += 1
    before = sum(len(s.content) for s in doc)
    doc = fit_document([Section(s.title, fit_section(s.content, SECTION_LIMIT)) for s in doc], DOCUMENT_LIMIT)
    _store(agent_id, doc)
    return promoted, skipped, before - sum(len(s.content) for s in doc)
