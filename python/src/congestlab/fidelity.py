"""Fidelity checks: is the emulated network doing what the spec asked?"""

from __future__ import annotations

import json
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
    background's rate needs a long enough window"). A rate-driven TCP background yields the bottleneck to a measured
    transfer and delivers what it held back once the transfer ends; what a window cannot
    absorb is the backlog of its last repetition, at most that repetition's measured bytes.
    Spread over the window it must stay within the tolerance:
    window >= 8 x measured bytes / (requested rate x tolerance). None when the measured bytes
    are not known in advance (then every window is checked)."""
    if measured_bytes is None or requested_bps <= 0:
        return None
    return 8 * measured_bytes / (requested_bps * tolerance_pct / 100)


def background_check(name: str, requested_bps: float, achieved_bps: float,
                     tolerance_pct: float = BACKGROUND_TOLERANCE_PCT, window_s: float | None = None,
                     min_window_s: float | None = None) -> Check:
    dev = (achieved_bps - requested_bps) / requested_bps * 100 if requested_bps else 0.0
    if window_s is not None and min_window_s is not None and window_s < min_window_s:
        return Check(f"background_rate_{name}", None, round(dev, 2),
                     f"within ±{tolerance_pct:g} % over >= {min_window_s:.2f} s",
                     f"not checked: window {window_s:.2f} s < {min_window_s:.2f} s")
    ok = abs(dev) <= tolerance_pct
    msg = "" if ok else (f"{name}: background achieved {achieved_bps / 1e6:.2f} of {requested_bps / 1e6:.2f} Mbit/s "
                         f"({dev:+.1f} %, beyond ±{tolerance_pct:g} %)")
    return Check(f"background_rate_{name}", ok, round(dev, 2), f"within ±{tolerance_pct:g} %", msg)


def checks_to_json(checks: list[Check]) -> list[dict]:
    return [asdict(c) for c in checks]
