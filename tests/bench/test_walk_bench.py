"""`bench walk`: the counts behind issue 38's walk figure, and the suite on the running loop."""

from __future__ import annotations

import io

import pytest

from markus.bench import walk


def test_a_stop_is_back_only_when_its_module_was_left_before() -> None:
    # loop → queue → loop (back) → lease → lease (no stop) → queue (back)
    assert walk.stops_and_back(["loop", "queue", "loop", "lease", "lease", "queue"]) == (5, 2)


def test_a_call_from_the_same_module_is_not_a_jump() -> None:
    steps = [
        ("loop", "run", None),
        ("queue", "read", "loop"),
        ("loop", "_next", "loop"),  # the loop's own function after its callee returned
        ("records", "log", "loop"),
        ("queue", "tidy", "loop"),  # entered before
    ]
    assert walk.jumps_and_back(steps) == (4, 1)


def test_first_reach_keeps_each_function_once_in_order() -> None:
    steps = [("a", "f", None), ("b", "g", "a"), ("a", "f", None), ("b", "h", "a")]
    assert walk.first_reach(steps) == [("a", "f", None), ("b", "g", "a"), ("b", "h", "a")]


@pytest.mark.django_db(transaction=True)
def test_the_walk_follows_one_chat_through_the_loop_to_its_reply() -> None:
    out = io.StringIO()
    figures = {figure.name: figure for figure in walk.run(out, {})}
    steps = walk.walk_of_one_chat()
    modules = {module for module, _, _ in steps}
    # the walk is the whole item: its start, its model call, its reply and its end
    assert {"attention.loop", "attention.settle", "attention.replies", "markus.llm.offline"} <= modules
    assert ("attention.loop", "run_attention", None) == steps[0]
    assert 0 < figures["stops back to a module left"].value < 1
    assert figures["stops back to a module left"].goal == pytest.approx(1 / 3)
    assert "stops" in out.getvalue()
