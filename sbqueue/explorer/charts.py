"""The entity page's bar chart, drawn on the server as SVG: messages per partition, each
bar stacked by kind. Why SVG by hand: one chart of at most 16 bars needs no chart library,
no script and no build step, and it renders in every browser and in a screenshot."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape

__all__ = ["SERIES", "partition_chart"]

SERIES = (("active", "#2b7bb9"), ("scheduled", "#8fbf4d"), ("dead_letter", "#d9534f"),
          ("transfer", "#f0ad4e"), ("transfer_dead_letter", "#7a4fa3"))
"""The kinds stacked in each bar, in order, and their colours."""

_BAR, _GAP, _LABEL, _WIDTH, _LEGEND = 18, 6, 44, 520, 24


def partition_chart(per_partition: Mapping[int, Mapping[str, int]]) -> str:
    """An SVG of one horizontal bar a partition, its length the partition's messages (the
    longest bar spans the chart), stacked by ``SERIES``; each segment titled with its
    kind and count, each bar labelled with its total."""
    partitions = sorted(per_partition)
    most = max((_total(per_partition[p]) for p in partitions), default=0)
    height = _LEGEND + len(partitions) * (_BAR + _GAP) + _GAP
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
             f'width="{_WIDTH + _LABEL + 80}" height="{height}" '
             f'aria-label="messages per partition">', _legend()]
    for row, partition in enumerate(partitions):
        parts.append(_bar(row, partition, per_partition[partition], most))
    parts.append("</svg>")
    return "".join(parts)


def _total(counts: Mapping[str, int]) -> int:
    return sum(int(counts.get(kind, 0)) for kind, _ in SERIES)


def _legend() -> str:
    items, x = [], _LABEL
    for kind, colour in SERIES:
        items.append(f'<rect x="{x}" y="4" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{x + 14}" y="13" font-size="11">{escape(kind)}</text>')
        x += 14 + 7 * len(kind) + 16
    return "".join(items)


def _bar(row: int, partition: int, counts: Mapping[str, int], most: int) -> str:
    y = _LEGEND + _GAP + row * (_BAR + _GAP)
    out = [f'<text x="0" y="{y + 13}" font-size="12">p{int(partition)}</text>']
    x = float(_LABEL)
    for kind, colour in SERIES:
        n = int(counts.get(kind, 0))
        if n <= 0 or most <= 0:
            continue
        width = _WIDTH * n / most
        out.append(f'<rect x="{x:.1f}" y="{y}" width="{max(width, 1.0):.1f}" height="{_BAR}" '
                   f'fill="{colour}" data-kind="{escape(kind)}" data-count="{n}">'
                   f'<title>partition {int(partition)}: {n} {escape(kind)}</title></rect>')
        x += width
    out.append(f'<text x="{x + 6:.1f}" y="{y + 13}" font-size="12" class="total">'
               f'{_total(counts)}</text>')
    return "".join(out)
