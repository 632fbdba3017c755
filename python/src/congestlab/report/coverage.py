"""What a report's run measured against what it planned: the planned (point, repetition)s
with rows in results/ (stored/run.py measured_runs), the planned ones without, with why where
the analysis said (manifest `analysis.repetitions`: no directory, no rep.json, no record, a
file it could not read), and the repetitions found that were not planned (left out)."""

from __future__ import annotations

from dataclasses import dataclass, field

from congestlab.report.data import RunData

NO_ROWS = "no row in results/ (`congestlab analyze RUN_DIR` rebuilds them)"


@dataclass
class Coverage:
    planned: int
    measured: int
    not_measured: list[str] = field(default_factory=list)  # "point #rep: why"
    unplanned: list[str] = field(default_factory=list)

    def warning(self) -> str | None:
        """One line for the report's warnings when the run measured other than it planned."""
        parts = []
        if self.not_measured:
            parts.append(f"{len(self.not_measured)} of {self.planned} planned repetitions were not measured")
        if self.unplanned:
            parts.append(f"{len(self.unplanned)} repetitions found were not planned and are left out")
        return "; ".join(parts) + " (listed under Fidelity)" if parts else None


def coverage(data: RunData) -> Coverage:
    stored = data.stored
    planned = stored.planned_runs
    measured = stored.measured_runs()
    found = (data.manifest.get("analysis") or {}).get("repetitions") or {}
    why = {(e.get("point"), e.get("repetition")): e.get("why", "") for key in ("missing", "not_analysed")
           for e in found.get(key) or [] if isinstance(e, dict)}
    out = Coverage(len(planned), sum(run in measured for run in planned))
    out.not_measured = [f"{point} #{rep}: {why.get((point, rep)) or NO_ROWS}" for point, rep in planned
                        if (point, rep) not in measured]
    out.unplanned = [f"{e.get('point')} #{e.get('repetition')}: {e.get('why', '')}" for e in found.get("unplanned") or []
                     if isinstance(e, dict)]
    return out
