"""MEMORY.md as text: parse it into sections, render it back, and the trimming rule
that keeps it within its limits. Pure functions, no database."""

from __future__ import annotations

import re
from dataclasses import dataclass

from markus.core.errors import MarkusError

# The limits of the document (the seed's MEMORY.md): a section's text, and the whole
# rendered document.
SECTION_LIMIT = 3000
DOCUMENT_LIMIT = 15000
TITLE_LIMIT = 200
# Text before the first ``## `` heading goes to this section.
DEFAULT_SECTION = "Notes"


class MemoryTooLarge(MarkusError):
    """The whole document is over its limit: 413 with ``limit``."""

    status_code = 413
    code = "payload_too_large"

    def __init__(self, chars: int, limit: int = DOCUMENT_LIMIT) -> None:
        super().__init__(f"MEMORY.md would be {chars} characters; the limit is {limit}")
        self.extra = {"limit": limit}


@dataclass
class Section:
    title: str
    content: str


def render(sections: list[Section]) -> str:
    """``## Title`` then the section's text, sections separated by a blank line. The
    text is escaped (``escape``) so that ``parse`` gives the same sections back."""
    return "\n\n".join(f"## {s.title}\n\n{escape(s.content)}".rstrip() for s in sections) + ("\n" if sections else "")


def document_chars(sections: list[Section]) -> int:
    return len(render(sections))


def newlines(text: str) -> str:
    """Line endings made ``\\n`` (a Windows or an old Mac editor)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


# A line ``parse`` takes for a section's heading, and a fence line (```` ``` ```` or
# ``~~~``) that opens or closes a code block.
_HEADING = re.compile(r"^##( |\s*$)")
_FENCE = re.compile(r"^\s*(```|~~~)")
# The same lines with one or more backslashes before them: written with one more
# backslash in the rendered document, and read with one less.
_ESCAPED = re.compile(r"^\\+(##( |\s*$)|\s*(```|~~~))")


def escape(content: str) -> str:
    """A section's text as the document holds it: a line that would read as a heading
    (``## …``) gets a backslash before it, and so does a fence left open at the end of
    the text (it would swallow the sections after it), and any line already so escaped
    gets one more. ``parse`` takes one off each such line."""
    lines = content.split("\n")
    opened: int | None = None
    for i, line in enumerate(lines):
        if _ESCAPED.match(line) or _HEADING.match(line):
            lines[i] = "\\" + line
        elif _FENCE.match(line):
            opened = i if opened is None else None
    if opened is not None:
        lines[opened] = "\\" + lines[opened]
    return "\n".join(lines)


def _unescape(line: str) -> str:
    return line[1:] if _ESCAPED.match(line) else line


def parse(markdown: str) -> list[Section]:
    """Sections by their ``## `` headings (not inside a fenced code block). A leading
    ``# `` title line is dropped; other text before the first heading becomes the
    section ``Notes``. A section's lines escaped by ``render`` lose their backslash.
    MarkusError for an empty, too long or repeated title, and for a document of only
    its title line (storing it would silently empty the memory)."""
    sections: list[Section] = []
    title: str | None = None
    lines: list[str] = []
    fenced = False
    first_line = True
    dropped = ""

    def close() -> None:
        text = "\n".join(lines).strip("\n").rstrip()
        if title is not None:
            sections.append(Section(title, text))
        elif text.strip():
            sections.append(Section(DEFAULT_SECTION, text))

    for line in newlines(markdown).split("\n"):
        if _FENCE.match(line):
            fenced = not fenced
        if not fenced and _HEADING.match(line):
            close()
            title, lines = check_title(line[2:]), []
        elif first_line and title is None and line.startswith("# "):
            dropped = line  # the document's own title
        else:
            lines.append(_unescape(line))
        first_line = first_line and not line.strip()
    close()
    if dropped and not sections:
        raise MarkusError(
            f"the document is only its title ({dropped.strip()!r}): a leading '# ' line is not stored, "
            "so it would empty the memory; put the text under '## ' section headings (an empty document clears it)"
        )
    seen: set[str] = set()
    for s in sections:
        if s.title.casefold() in seen:
            raise MarkusError(f"section {s.title!r} appears twice")
        seen.add(s.title.casefold())
    return sections


def check_title(raw: str) -> str:
    title = " ".join(raw.split())
    if not title:
        raise MarkusError("a section title must not be empty")
    if len(title) > TITLE_LIMIT:
        raise MarkusError(f"section title is {len(title)} characters; the limit is {TITLE_LIMIT}")
    return title


def check_sections(sections: list[Section]) -> None:
    """400 for a section over SECTION_LIMIT, 413 for a document over DOCUMENT_LIMIT."""
    for s in sections:
        if len(s.content) > SECTION_LIMIT:
            raise MarkusError(f"section {s.title!r} is {len(s.content)} characters; the limit is {SECTION_LIMIT}")
    chars = document_chars(sections)
    if chars > DOCUMENT_LIMIT:
        raise MemoryTooLarge(chars)


# ---------------------------------------------------------------------------- trimming


def fit_section(content: str, limit: int = SECTION_LIMIT) -> str:
    """The rule: a section keeps its newest text. Whole lines are dropped from its top
    (the oldest) until it fits; a single line still too long keeps its first
    ``limit - 1`` characters and an ellipsis."""
    if len(content) <= limit:
        return content
    lines = content.split("\n")
    while len(lines) > 1 and len("\n".join(lines)) > limit:
        lines.pop(0)
    text = "\n".join(lines).strip("\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fit_document(sections: list[Section], limit: int = DOCUMENT_LIMIT) -> list[Section]:
    """The rule: while the document is over ``limit``, the longest section (the first
    of equals) loses its oldest (top) line; a section left empty is removed."""
    sections = [Section(s.title, s.content) for s in sections]
    while sections and document_chars(sections) > limit:
        longest = max(sections, key=lambda s: len(s.content))
        lines = longest.content.split("\n")
        if len(lines) > 1:
            longest.content = "\n".join(lines[1:]).strip("\n")
        else:
            over = document_chars(sections) - limit
            longest.content = longest.content[: max(0, len(longest.content) - over - 1)]
        if not longest.content.strip():
            sections.remove(longest)
    return sections


def normalized(text: str) -> str:
    """Text compared for sameness: case, spacing, a leading bullet and the final
    punctuation do not count."""
    text = re.sub(r"^\s*[-*•]\s+", "", text)
    return " ".join(text.casefold().split()).rstrip(".!;,")
