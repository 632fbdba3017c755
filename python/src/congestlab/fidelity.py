"""Fidelity checks: is the emulated network doing what the spec asked?"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import asdict, dataclass

BACKGROUND_TOLERANCE_PCT = 3.0


@dataclass
class Check:
    name: str
    ok: bool | None  # None: not checked (the data cannot decide it; message says why)
    value: float | str | None
    expected: str
    message: str = ""


def failed(check: Check | dict) -> bool:
    """A check that ran and failed (a check not checked is no warning)."""
    return (check.get("ok", True) if isinstance(check, dict) else check.ok) is False


def read_cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine from /proc/stat."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return total - idle, total


def cpu_busy_pct(before: tuple[int, int], after: tuple[int, int]) -> float:
    busy, total = after[0] - before[0], after[1] - before[1]
    return 100.0 * busy / total if total > 0 else 0.0


def qdisc_counters(tc_json: str) -> dict[str, dict]:
    """`tc -s -j qdisc show dev X` -> {handle: {kind, sent_packets, drops, overlimits, backlog}}."""
    out = {}
    for q in json.loads(tc_json or "[]"):
        out[q.get("handle", "?")] = {
            "kind": q.get("kind"),
            "limit": q.get("limit"),
            "sent_bytes": q.get("bytes", 0),
            "sent_packets": q.get("packets", 0),
            "drops": q.get("drops", 0),
            "overlimits": q.get("overlimits", 0),
        }
    return out


def qdisc_delta(before: dict[str, dict], after: dict[str, dict]) -> dict[str, dict]:
    delta = {}
    for handle, now in after.items():
        was = before.get(handle, {})
        delta[handle] = {"kind": now["kind"]} | {
            k: now[k] - was.get(k, 0) for k in ("sent_bytes", "sent_packets", "drops", "overlimits")
        }
    return delta


def background_min_window_s(measured_bytes: float | None, requested_bps: float,
                            tolerance_pct: float = BACKGROUND_TOLERANCE_PCT) -> float | None:
    """The shortest window over which a background's achieved rate says something about the
    background rather than about the measured transfer beside it (docs/statistics.md, "A
    background's rate needs a long enough window"). A rate-driven TCP background yields the
    bottleneck to a measured transfer and delivers what it held back once the transfer ends;
    what a window cannot absorb is the backlog of its last repetition, at most that
    repetition's measured bytes.
    Spread over the window it must stay within the tolerance:
    window >= 8 x measured bytes / (requested rate x tolerance). None when the measured bytes
    are not known in advance (then every window is checked)."""
    if measured_bytes is None or requested_bps <= 0:
        return None
    return 8 * measured_bytes / (requested_bps * tolerance_pct / 100)


def background_check(name: str, requested_bps: float, sent_bps: float,
                     tolerance_pct: float = BACKGROUND_TOLERANCE_PCT, window_s: float | None = None,
                     min_window_s: float | None = None) -> Check:
    dev = (sent_bps - requested_bps) / requested_bps * 100 if requested_bps else 0.0
    if window_s is not None and min_window_s is not None and window_s < min_window_s:
        return Check(f"background_rate_{name}", None, round(dev, 2),
                     f"within ±{tolerance_pct:g} % over >= {min_window_s:.2f} s",
                     f"not checked: window {window_s:.2f} s < {min_window_s:.2f} s")
    ok = abs(dev) <= tolerance_pct
    msg = "" if ok else (f"{name}: background sent {sent_bps / 1e6:.2f} of {requested_bps / 1e6:.2f} Mbit/s "
                         f"({dev:+.1f} %, beyond ±{tolerance_pct:g} %)")
    return Check(f"background_rate_{name}", ok, round(dev, 2), f"within ±{tolerance_pct:g} %", msg)


def checks_to_json(checks: list[Check]) -> list[dict]:
    return [asdict(c) for c in checks]


def checks_from_json(rows: list[dict]) -> list[Check]:
    return [Check(r["name"], r["ok"], r.get("value"), r.get("expected", ""), r.get("message", "")) for r in rows]


SHOWN_IDS = 3  # a summary names this many of the repetitions over the limit


def _named_ids(ids: list[str]) -> str:
    return ", ".join(ids[:SHOWN_IDS]) + (f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")


def _repetition_of(check: Check) -> str:
    return check.name.split("@", 1)[1]


def _drift_us(check: Check) -> float:
    """A repetition's clock drift in µs (a run recorded before the value was in µs stored ns,
    expected "|drift| <= 1 ms")."""
    value = float(check.value)
    return value / 1000 if check.expected.endswith("1 ms") else value


def _clock_drift_summary(rows: list[Check]) -> Check:
    """probe_clock_drift over the run: worst and median |drift|, how many repetitions beyond the
    limit and which (runner/captures.py records one per repetition)."""
    drifts = [abs(_drift_us(c)) for c in rows]
    over = [_repetition_of(c) for c in rows if c.ok is False]
    worst, median = max(drifts), statistics.median(drifts)
    limit = rows[0].expected.replace(" 1 ms", " 1000 µs")
    text = f"worst {worst:.3f} µs, median {median:.3f} µs over {len(rows)} repetitions; "  # ns resolution
    if not over:
        return Check("probe_clock_drift", True, round(worst, 3), f"{limit} in each repetition",
                     text + "none beyond the limit")
    return Check("probe_clock_drift", False, round(worst, 3), f"{limit} in each repetition",
                 text + f"{len(over)} beyond the limit ({_named_ids(over)}): the real-time clock moved against the "
                 "monotonic one there, so their series' alignment is interpolated across the jump")


def _repetitions_failed(rows: list[Check], worst: Check, worst_value: str) -> str:
    """'K of N repetitions failed (the first ids); worst ID (its value): its message' for a
    summary's message."""
    over = [_repetition_of(c) for c in rows if c.ok is False]
    return (f"{len(over)} of {len(rows)} repetitions failed ({_named_ids(over)}); "
            f"worst {_repetition_of(worst)} ({worst_value}): {worst.message}")


def _previous_closed_summary(rows: list[Check]) -> Check:
    """get_previous_closed over the run: the longest wait for the previous GET's connection to
    close (ms) and the repetitions where a GET started before it had (workloads/get.py records
    one per repetition; worst = the failed repetition that waited longest)."""
    expected = f"{rows[0].expected} in each repetition"
    worst = max(rows, key=lambda c: float(c.value))
    text = f"longest wait {float(worst.value):g} ms over {len(rows)} repetitions; "
    failures = [c for c in rows if c.ok is False]
    if not failures:
        return Check("get_previous_closed", True, worst.value, expected,
                     text + "every GET started after the previous connection closed")
    worst_failed = max(failures, key=lambda c: float(c.value))
    return Check("get_previous_closed", False, worst.value, expected,
                 text + _repetitions_failed(rows, worst_failed, f"waited {float(worst_failed.value):g} ms"))


def _probe_rows_dropped(check: Check) -> int:
    """Rows a repetition's sampler dropped: the sum of probe_complete's "lost L, over the cap T"
    (runner/captures.py)."""
    return sum(int(n) for n in re.findall(r"\d+", str(check.value)))


def _probe_complete_summary(rows: list[Check]) -> Check:
    """probe_complete over the run: the repetition whose sampler dropped the most rows and the
    repetitions that dropped any (runner/captures.py records one per repetition)."""
    expected = f"{rows[0].expected} in each repetition"
    worst = max(rows, key=_probe_rows_dropped)
    failures = [c for c in rows if c.ok is False]
    if not failures:
        return Check("probe_complete", True, worst.value, expected,
                     f"no rows dropped in {len(rows)} repetitions")
    worst = max(failures, key=_probe_rows_dropped)
    return Check("probe_complete", False, worst.value, expected, _repetitions_failed(rows, worst, str(worst.value)))


def _probe_stopped_summary(rows: list[Check]) -> Check:
    """probe_stopped over the run: the repetitions whose sampler gave no stop line
    (runner/captures.py records the check only then, so every row is a failure)."""
    ids = [_repetition_of(c) for c in rows]
    return Check("probe_stopped", False, f"{len(rows)} without", f"{rows[0].expected} in each repetition",
                 f"{len(rows)} repetitions without it ({_named_ids(ids)}): {rows[0].message}")


# checks recorded once per repetition that a run shows as one summary row (each repetition's row
# stays in rep.json and in the manifest's fidelity.per_repetition); a summary fails when any
# repetition's row failed, and says how many did and which was worst
PER_RUN_SUMMARIES = {"probe_clock_drift": _clock_drift_summary,
                     "get_previous_closed": _previous_closed_summary,
                     "probe_complete": _probe_complete_summary,
                     "probe_stopped": _probe_stopped_summary}


def fold_per_run(checks: list[Check]) -> tuple[list[Check], list[Check]]:
    """(the checks with one summary row per kind of PER_RUN_SUMMARIES, where its first
    repetition's row was; the repetitions' rows it replaced)."""
    groups: dict[str, list[Check]] = {}
    shown: list[Check | str] = []
    for c in checks:
        kind, _, where = c.name.partition("@")
        if kind in PER_RUN_SUMMARIES and where:
            if kind not in groups:
                shown.append(kind)
            groups.setdefault(kind, []).append(c)
        else:
            shown.append(c)
    folded = [PER_RUN_SUMMARIES[c](groups[c]) if isinstance(c, str) else c for c in shown]
    return folded, [c for rows in groups.values() for c in rows]


def manifest_section(checks: list[Check]) -> dict:
    """The manifest's `fidelity`: the checks (per-run summaries folded in), the failed ones'
    messages, and the repetitions' rows behind the summaries."""
    shown, per_repetition = fold_per_run(checks)
    return {"checks": checks_to_json(shown), "warnings": [c.message for c in shown if failed(c)],
            "per_repetition": checks_to_json(per_repetition)}
