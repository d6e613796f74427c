"""MEMORY.md as text: sections by heading, render and parse round trip, the limits and
the trimming rules."""

from __future__ import annotations

import pytest

from markus.core.errors import MarkusError
from markus.memory.document import (
    DOCUMENT_LIMIT,
    SECTION_LIMIT,
    MemoryTooLarge,
    Section,
    check_sections,
    document_chars,
    fit_document,
    fit_section,
    parse,
    render,
)


def test_markdown_parses_into_sections_and_renders_back():
    text = (
        "# MEMORY.md\n\nloose note\n\n## People\n\n- Alice owns the release\n\n"
        "## Lessons\n\n### Deploys\nnever on Friday\n"
    )
    doc = parse(text)
    assert [(s.title, s.content) for s in doc] == [
        ("Notes", "loose note"),
        ("People", "- Alice owns the release"),
        ("Lessons", "### Deploys\nnever on Friday"),
    ]
    assert parse(render(doc)) == doc


def test_a_heading_inside_a_code_fence_is_text():
    doc = parse("## Snippets\n\n```\n## not a heading\n```\n")
    assert [s.title for s in doc] == ["Snippets"]
    assert "## not a heading" in doc[0].content


@pytest.mark.parametrize(
    ("text", "message"),
    [("## A\nx\n## a\ny", "appears twice"), ("##\nx", "must not be empty"), ("## " + "t" * 201, "limit is 200")],
)
def test_bad_titles_are_refused(text, message):
    with pytest.raises(MarkusError, match=message):
        parse(text)


def test_the_limits_answer_400_for_a_section_and_413_for_the_document():
    with pytest.raises(MarkusError, match="limit is 3000") as exc:
        check_sections([Section("Big", "x" * (SECTION_LIMIT + 1))])
    assert exc.value.status_code == 400
    check_sections([Section("Full", "x" * SECTION_LIMIT)])
    many = [Section(f"S{i}", "x" * 2990) for i in range(6)]
    with pytest.raises(MemoryTooLarge) as too_big:
        check_sections(many)
    assert too_big.value.status_code == 413 and too_big.value.extra == {"limit": DOCUMENT_LIMIT}


def test_a_section_keeps_its_newest_lines():
    lines = [f"line {i:04d} " + "x" * 90 for i in range(40)]
    kept = fit_section("\n".join(lines), 1000)
    assert len(kept) <= 1000
    assert kept.endswith(lines[-1]) and lines[0] not in kept
    assert kept.split("\n") == lines[-len(kept.split("\n")) :]
    assert fit_section("y" * 5000, 1000) == "y" * 999 + "…"


def test_the_document_loses_the_oldest_lines_of_its_longest_section_first():
    big = Section("Big", "\n".join(f"old {i} " + "b" * 200 for i in range(14)))
    small = Section("Small", "keep me")
    fitted = fit_document([small, big], 2000)
    assert document_chars(fitted) <= 2000
    assert fitted[0] == small
    assert fitted[1].content.endswith("old 13 " + "b" * 200) and "old 0 " not in fitted[1].content


@pytest.mark.parametrize(
    "content",
    [
        "Fridays only\n## Rollback\nuse the script",
        "##\n##   \n## x",
        "\\## already escaped\n\\\\## twice",
        "```\nan open fence",
        "```\ncode\n```\n~~~\nopen again\n## inside",
        "   ```\n\\```\n\\   ~~~",
        "```\n## in a closed fence\n```",
        "### a deeper heading stays\n# and a top one",
    ],
)
def test_what_render_gives_parses_back_to_the_same_sections(content):
    doc = [Section("First", content), Section("Second", "after it")]
    text = render(doc)
    assert [(s.title, s.content) for s in parse(text)] == [(s.title, s.content) for s in doc]
    assert render(parse(text)) == text


def test_a_heading_line_in_a_section_is_escaped_and_a_balanced_fence_is_not():
    assert render([Section("A", "x\n## B\n```\ncode\n```")]) == "## A\n\nx\n\\## B\n```\ncode\n```\n"
    assert render([Section("A", "```\nopen")]) == "## A\n\n\\```\nopen\n"


def test_line_endings_of_any_editor_are_read_as_newlines():
    assert [(s.title, s.content) for s in parse("## A\r\n\r\none\rtwo\r\n")] == [("A", "one\ntwo")]
