"""A measured GET's timeout chosen per point from what the study's claims need: the seed's
longest published delay at the point's level times a stated margin (docs/spec.md, "GET
timeouts from the published delays").

A `get` workload with `timeout = "from-published"` waits, at a point of level L,

    min(timeout_s, max(timeout_min_s, timeout_margin x D(L)))

where D(L) is the longest value of the `timeout_published` metrics (delays; `_ms` or `_s` by
the name's suffix) over the study's published rows with `level = L`, whatever their other
keys (a level is one congestion condition: every experiment at it shares the background).
`timeout_s` stays the most it ever waits (so `--quick`'s shorter timeout still bounds it) and
the wait at a point with no level axis or no published delay at its level. A GET that times
out is a censored sample (report/data.py), so a shorter wait loses only what a claim would
read beyond it (docs/rto-study.md, "The GET's timeout").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FROM_PUBLISHED = "from-published"


@dataclass(frozen=True)
class ChosenTimeout:
    workload: str
    timeout_s: float
    basis: str  # how it was chosen (below)
    level: str | None
    published_delay_s: float | None  # D(L)
    published_row: dict | None  # the published row D(L) came from (its keys and the metric)
    margin: float | None
    min_s: float | None
    declared_s: float  # the workload's timeout_s at this point (the ceiling)
    reason: str | None

    def describe(self) -> dict:
        return {"workload": self.workload, "timeout_s": self.timeout_s, "basis": self.basis, "level": self.level,
                "published_delay_s": self.published_delay_s, "published_row": self.published_row,
                "margin": self.margin, "min_s": self.min_s, "declared_timeout_s": self.declared_s,
                "reason": self.reason}


# `basis` values
MARGIN = "margin x longest published delay"
FLOOR = "timeout_min_s (margin x longest published delay is shorter)"
CEILING = "timeout_s (margin x longest published delay is longer)"
NO_LEVEL = "timeout_s (the point has no level axis)"
NO_DELAY = "timeout_s (no published delay at this level)"


def delay_s(row: dict[str, Any], metric: str) -> float | None:
    """The row's value of a delay metric in seconds (by the name's suffix), None if absent."""
    value = row.get(metric)
    if value is None or isinstance(value, (bool, str)):
        return None
    return float(value) / 1000.0 if metric.endswith("_ms") else float(value)


def longest_published_delay(published: list[dict], level: str, metrics: list[str]) -> tuple[float, dict] | None:
    """The longest delay published at `level` and the row (its keys and the metric) it is from."""
    best: tuple[float, dict] | None = None
    for row in published:
        if str(row.get("level")) != level:
            continue
        for metric in metrics:
            seconds = delay_s(row, metric)
            if seconds is not None and (best is None or seconds > best[0]):
                best = (seconds, {"metric": metric, "row": dict(row)})
    return best


def has_published_delay(published: list[dict], metrics: list[str]) -> bool:
    return any(delay_s(row, m) is not None for row in published for m in metrics)


def choose(workload, level: str | None, published: list[dict]) -> ChosenTimeout:
    """The timeout of a `get` workload (already resolved for the point) at a point of `level`."""
    common = dict(workload=workload.name, level=level, margin=workload.timeout_margin, min_s=workload.timeout_min_s,
                  declared_s=workload.timeout_s, reason=workload.timeout_reason)
    if level is None:
        return ChosenTimeout(timeout_s=workload.timeout_s, basis=NO_LEVEL, published_delay_s=None,
                             published_row=None, **common)
    found = longest_published_delay(published, level, workload.timeout_published)
    if found is None:
        return ChosenTimeout(timeout_s=workload.timeout_s, basis=NO_DELAY, published_delay_s=None,
                             published_row=None, **common)
    longest_s, row = found
    wanted = round(workload.timeout_margin * longest_s, 1)
    floor = workload.timeout_min_s or 0.0
    if wanted > workload.timeout_s:
        chosen, basis = workload.timeout_s, CEILING
    elif wanted < floor:
        chosen, basis = floor, FLOOR
    else:
        chosen, basis = wanted, MARGIN
    return ChosenTimeout(timeout_s=chosen, basis=basis, published_delay_s=longest_s, published_row=row, **common)


def describe_timeout(t: dict) -> str:
    """One line for --dry-run: the timeout and where it came from (a ChosenTimeout.describe())."""
    head = f"{t['timeout_s']:g} s"
    if t["published_delay_s"] is None:
        return f"{head} = {t['basis']}"
    row = t["published_row"]["row"]
    source = ", ".join(f"{k} {v}" for k, v in row.items() if k not in t["published_row"]["metric"]
                       and isinstance(v, str))
    return (f"{head} = {t['basis']}: {t['margin']:g} x {t['published_delay_s']:.4g} s published ({source}), "
            f"at least {t['min_s'] or 0:g} s, at most {t['declared_timeout_s']:g} s")
