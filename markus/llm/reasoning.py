"""A reasoning model's thinking written into its answer's content, left out of it.

A server of the OpenAI wire that does not split a reasoning model's thinking out (no
reasoning parser) sends it in the content: ``<think>…</think>`` first, then the answer;
or, when the chat template opened the tag in the prompt, the thinking and only the
closing tag. The thinking is not the answer: a person must not get it as a reply, and a
call it mentions is no call. ``without_reasoning`` is the answer of a whole text;
``ReasoningFilter`` passes on only the answer's deltas as they stream (thinking that
opened in the prompt is known only at its closing tag, so its deltas went out already;
the answer's text leaves it out all the same)."""

from __future__ import annotations

from collections.abc import Callable

OPEN, CLOSE = "<think>", "</think>"


def without_reasoning(text: str) -> str:
    """The text after the thinking it opens with; the text itself when it opens with none
    ("" when the thinking never closed: it ran to the answer's limit)."""
    head = text.lstrip()
    if head.startswith(OPEN):
        end = head.find(CLOSE)
        return "" if end < 0 else head[end + len(CLOSE) :].lstrip()
    end = text.find(CLOSE)
    if end >= 0 and OPEN not in text[:end]:  # the template opened the tag
        return text[end + len(CLOSE) :].lstrip()
    return text


class ReasoningFilter:
    """Deltas in, the answer's deltas out (to ``emit``): a text that opens with ``<think>``
    is held back to its ``</think>``, and the space after it; any other passes at once
    (the first piece waits only while it could still be the opening tag)."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self.emit = emit
        self.held = ""
        self.state = "opening"  # opening → thinking → after → answer, or opening → answer

    def feed(self, piece: str) -> None:
        if self.state == "answer":
            return self.emit(piece)
        self.held += piece
        if self.state == "opening":
            head = self.held.lstrip()
            if OPEN.startswith(head):
                return  # nothing yet, or the start of the tag
            if not head.startswith(OPEN):
                return self._answer(self.held)
            self.state = "thinking"
        if self.state == "thinking":
            end = self.held.find(CLOSE)
            if end < 0:
                return
            self.held, self.state = self.held[end + len(CLOSE) :], "after"
        rest = self.held.lstrip()
        if rest:
            self._answer(rest)

    def end(self) -> None:
        """The stream ended: a text too short to tell from the opening tag is the answer."""
        if self.state == "opening" and self.held.strip():
            self._answer(self.held)

    def _answer(self, text: str) -> None:
        self.held, self.state = "", "answer"
        self.emit(text)
