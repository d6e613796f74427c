"""The chart geometry: bars scale to the largest value and long labels are shortened
(the tooltip keeps them whole)."""

from __future__ import annotations

from markus.console.charts import bar_chart


def test_bars_scale_to_the_largest_value_from_a_common_baseline():
    chart = bar_chart("t", [{"label": "a", "value": 4}, {"label": "b", "value": 2}, {"label": "c", "value": 0}])
    a, b, c = chart.bars
    assert a.height == 2 * b.height and c.height == 0
    assert a.y + a.height == b.y + b.height == chart.baseline
    assert chart.max_value == 4 and chart.total == 6


def test_an_all_zero_chart_draws_no_bars_and_does_not_divide_by_zero():
    chart = bar_chart("t", [{"label": "a", "value": 0}])
    assert chart.bars[0].height == 0 and chart.max_value == 1
    assert bar_chart("t", []).bars == []


def test_long_labels_are_shortened_but_the_tooltip_keeps_them():
    points = [{"label": f"A very long agent name {i}", "value": i} for i in range(30)]
    chart = bar_chart("t", points)
    assert all(len(b.label) < len(b.full_label) for b in chart.bars)
    assert chart.bars[3].full_label == "A very long agent name 3"
