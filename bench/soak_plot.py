"""The soak's plot as a small hand-written SVG (no plotting dependency): throughput, RSS and open
descriptors over time, one panel each, sharing the time axis.

Throughput lines are 5-second moving averages of per-second counts (archive writes arrive in batches, so
single seconds jump between 0 and several thousand).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["moving_average", "render_svg"]

WIDTH, PANEL_H, LEFT, RIGHT, TOP, GAP = 1060, 230, 70, 230, 40, 50
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf")

Series = Mapping[str, Sequence[float | None]]


def moving_average(values: Sequence[float], width: int = 5) -> list[float]:
    """Trailing mean over ``width`` samples (fewer at the start)."""
    out: list[float] = []
    total = 0.0
    for i, v in enumerate(values):
        total += v
        if i >= width:
            total -= values[i - width]
        out.append(total / min(i + 1, width))
    return out


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks if span > 0 else 1.0
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw))


def _panel(top: float, title: str, t: Sequence[float], series: Series, unit: str, t_max: float) -> list[str]:
    plot_w = WIDTH - LEFT - RIGHT
    values = [v for ys in series.values() for v in ys if v is not None]
    y_max = max(values, default=1.0) * 1.08 or 1.0
    step = _nice_step(y_max)

    def x(at: float) -> float:
        return LEFT + plot_w * at / t_max

    def y(v: float) -> float:
        return top + PANEL_H - PANEL_H * v / y_max

    out = [
        f'<text x="{LEFT}" y="{top - 10}" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{LEFT}" y="{top}" width="{plot_w}" height="{PANEL_H}" fill="none" stroke="#999"/>',
    ]
    tick = 0.0
    while tick <= y_max:
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>'
        )
        out.append(f'<text x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
        tick += step
    out.append(
        f'<text x="16" y="{top + PANEL_H / 2}" transform="rotate(-90 16 {top + PANEL_H / 2})" '
        f'text-anchor="middle">{escape(unit)}</text>'
    )
    for k, (name, ys) in enumerate(series.items()):
        color = COLORS[k % len(COLORS)]
        points = " ".join(f"{x(at):.1f},{y(v):.1f}" for at, v in zip(t, ys, strict=False) if v is not None)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.3" points="{points}"/>')
        ly = top + 14 + 16 * k
        out.append(
            f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 32}" y1="{ly - 4}" '
            f'y2="{ly - 4}" stroke="{color}" stroke-width="2"/>'
        )
        out.append(f'<text x="{WIDTH - RIGHT + 38}" y="{ly}">{escape(name)}</text>')
    return out


def render_svg(
    title: str,
    t: Sequence[float],
    throughput: Series,
    rss_mib: Series,
    fds: Series,
) -> str:
    """Three panels over ``t`` (seconds since the load started)."""
    t_max = max(t, default=1.0) or 1.0
    height = TOP + 3 * (PANEL_H + GAP) + 20
    body: list[str] = [f'<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{escape(title)}</text>']
    panels = (
        ("Throughput (envelopes/s, 5 s moving average)", throughput, "envelopes/s"),
        ("RSS per process", rss_mib, "MiB"),
        ("Open file descriptors per process", fds, "descriptors"),
    )
    for i, (name, series, unit) in enumerate(panels):
        body += _panel(TOP + 10 + i * (PANEL_H + GAP), name, t, series, unit, t_max)
    axis_y = TOP + 10 + 3 * PANEL_H + 2 * GAP
    step = _nice_step(t_max, 10)
    tick = 0.0
    while tick <= t_max:
        px = LEFT + (WIDTH - LEFT - RIGHT) * tick / t_max
        body.append(f'<text x="{px:.1f}" y="{axis_y + 16}" text-anchor="middle">{tick:g}</text>')
        tick += step
    body.append(
        f'<text x="{LEFT + (WIDTH - LEFT - RIGHT) / 2}" y="{axis_y + 34}" text-anchor="middle">'
        "seconds since the load started</text>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">\n'
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>\n' + "\n".join(body) + "\n</svg>\n"
    )
