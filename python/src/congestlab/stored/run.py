"""A stored run directory read once into types: its study and each point as validated spec
objects (what each point ran with), its repetitions with their records checked against their
kinds' schemas, and its result tables. Older runs come through rundir/upgrade.py, so every
reader here sees the current format only. Nothing outside congestlab.stored and
congestlab.rundir indexes the stored spec or parses a stored number itself."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from congestlab.errors import RunDirError
from congestlab.results import KIND_COLUMNS, numbered_results
from congestlab.rundir import layout, upgrade
from congestlab.rundir.manifest import checked_manifest, planned_runs, read_manifest
from congestlab.rundir.records import RAW_KIND, Record, RecordError, get_record, pass_through
from congestlab.rundir.rep_info import rep_info_problem
from congestlab.spec.fieldpath import FieldPathError, apply, field_path
from congestlab.spec.models import StudySpec
from congestlab.spec.validation_context import STORED, VALUES_CHECKED
from congestlab.spec.report import ReportSpec, load_report_spec
from congestlab.stored.result_check import check_results
from congestlab.stored.rows import ResultRow


@dataclass(frozen=True)
class Absence:
    """A planned repetition without data, or one found that was not planned, and why."""

    point: str
    repetition: int
    why: str

    def __str__(self) -> str:
        return f"{self.point} #{self.repetition}: {self.why}"


def _no_records(folder: Path, point: "StoredPoint | None") -> str:
    """Why a completed repetition has no data: records.jsonl missing, or without one record
    while its point ran workloads ("" when it has records, or its point none)."""
    path = folder / layout.RECORDS
    try:
        text = path.read_bytes()
    except OSError:
        return f"no {layout.RECORDS}"
    if point is not None and point.workloads and not text.strip():
        return f"{layout.RECORDS} holds no record"
    return ""


class StoredRun:
    """One run directory. `raw` is the manifest as stored (what a writer writes back);
    `manifest` the same upgraded to the current format (what readers read)."""

    def __init__(self, path: Path, require_complete: bool = True, manifest: dict | None = None):
        """`manifest`: the manifest a running run holds in memory (checked as a stored one)."""
        self.path = Path(path)
        self.raw = read_manifest(self.path, require_complete) if manifest is None else checked_manifest(
            self.path, manifest, require_complete)
        self.version: int = self.raw["format_version"]
        self.manifest = upgrade.manifest_view(self.raw)
        self.axes: list[str] = list(self.manifest.get("axes") or [])
        self.points = [StoredPoint(self, p) for p in self.manifest.get("points") or []]
        self._points = {p.id: p for p in self.points}
        self._results: dict[str, list[ResultRow]] = {}

    @property
    def where(self) -> str:
        return str(self.path / layout.MANIFEST)

    @cached_property
    def spec_data(self) -> dict:
        """The stored spec as the current models take it (rundir/upgrade.py stored_spec_view)."""
        return self.manifest.get("spec") or {}

    @cached_property
    def study(self) -> StudySpec:
        """The study as it ran, validated (its points' settings not applied)."""
        return self._validated(self.spec_data, "spec", checked=False)

    @property
    def published(self) -> list[dict]:
        return list(self.study.published)

    @cached_property
    def report(self) -> ReportSpec | None:
        """The study's `[report]` declaration, validated; None when it declares none (a
        SpecError naming the field when it is damaged)."""
        return load_report_spec(self.spec_data) if self.spec_data.get("report") else None

    def ran(self, spec: StudySpec, quick: bool) -> bool:
        """Whether this run ran `spec` (with `quick`) as far as the run goes: what `--resume`
        requires (rundir/upgrade.py same_run_spec)."""
        return upgrade.same_run_spec(self.raw.get("spec"), spec, quick)

    def point(self, point_id: str) -> StoredPoint:
        try:
            return self._points[point_id]
        except KeyError:
            raise RunDirError(f"{self.where}: point {point_id!r} is not in the manifest") from None

    @cached_property
    def planned(self) -> dict[tuple[str, int], dict]:
        """(point id, repetition) -> its place in the run (round, block, run index) as the
        manifest's run_order recorded it."""
        return {(r["point"], r["repetition"]): r for r in self.manifest["run_order"]}

    @cached_property
    def planned_runs(self) -> list[tuple[str, int]]:
        """Every (point id, repetition) the run planned (rundir/manifest.py planned_runs)."""
        return planned_runs(self.manifest)

    def repetitions(self) -> list[StoredRepetition]:
        """Every planned repetition that wrote its rep.json, in the order of their directories
        (one found that was not planned is in `unplanned()`, not here)."""
        planned = set(self.planned_runs)
        return [StoredRepetition(self._points[point_id], rep, folder)
                for point_id, rep, folder in layout.completed_repetitions(self.path)
                if (point_id, rep) in planned and point_id in self._points]

    def missing(self) -> list[Absence]:
        """Every planned (point, repetition) without data in the directory, with why: no
        directory, no rep.json (it did not complete), or no record in records.jsonl."""
        found = {(point_id, rep): folder for point_id, rep, folder in layout.repetition_dirs(self.path)}
        out = []
        for point_id, rep in self.planned_runs:
            folder = found.get((point_id, rep))
            why = (f"no directory {layout.POINTS_DIR}/{point_id}/r{rep}" if folder is None
                   else f"no {layout.REP_INFO}: it did not complete" if not (folder / layout.REP_INFO).is_file()
                   else _no_records(folder, self._points.get(point_id)))
            if why:
                out.append(Absence(point_id, rep, why))
        return out

    def unplanned(self) -> list[Absence]:
        """Every repetition found complete (with rep.json) that the run did not plan: left out."""
        planned = set(self.planned_runs)
        return [Absence(point_id, rep, "not in the manifest's points" if point_id not in self._points
                        else "not planned")
                for point_id, rep, _ in layout.completed_repetitions(self.path) if (point_id, rep) not in planned]

    def results(self, kind: str) -> list[ResultRow]:
        """Rows of one result table, each value in one spelling (stored/rows.py norm), checked
        against the table's column types and keys and the plan (stored/result_check.py); []
        when the run has no such table."""
        if kind not in self._results:
            header, numbered = numbered_results(self.path, kind)
            if kind == "request" and self.version < upgrade.FORMAT_VERSION:
                numbered = [(line, upgrade.request_row_view(row, self.version, self._row_timeout(row)))
                            for line, row in numbered]
            check_results(self, kind, header, numbered)
            self._results[kind] = [ResultRow.of(row) for _, row in numbered]
        return self._results[kind]

    def measured_runs(self) -> set[tuple[str, int]]:
        """(point id, repetition) of every repetition with a row in the results (the tables a
        repetition writes rows to; the RTO replay's samples and thresholds add none)."""
        out = set()
        for kind in KIND_COLUMNS:
            if kind in ("rto_threshold", "rto_samples") or not self.has_results(kind):
                continue
            out |= {(row["point_id"], int(row.number("repetition"))) for row in self.results(kind)}
        return out

    def has_results(self, kind: str) -> bool:
        return (self.path / layout.RESULTS_DIR / f"{kind}.csv").exists()

    def _row_timeout(self, row: dict):
        def timeout_s() -> float | None:
            point = self._points.get(row.get("point_id", ""))
            return point.request_timeout_s(row.get("server", ""), row.get("client", "")) if point else None
        return timeout_s

    def _validated(self, data: dict, where: str, checked: bool) -> StudySpec:
        try:
            return StudySpec.model_validate(data, context={STORED: True, VALUES_CHECKED: checked})
        except ValidationError as err:
            first = err.errors()[0]
            loc = field_path(first["loc"], data)
            raise RunDirError(f"{self.where}: damaged {where}: {loc}: "
                              f"{first['msg'].removeprefix('Value error, ')}") from None


class StoredPoint:
    """A sweep point as the manifest recorded it, with the spec it ran with (`study`)."""

    def __init__(self, run: StoredRun, entry: dict):
        self.run = run
        self.id: str = entry["id"]
        self.experiment: str = entry["experiment"]
        self.labels: dict[str, str] = {k: v for k, v in (entry.get("axes") or {}).items()}
        self.settings: dict = dict(entry.get("settings") or {})
        self.repetitions: int = entry.get("repetitions", 1)
        self.unit: int = entry.get("unit", 0)
        self.servers: list[str] = list(entry.get("servers") or [])
        self.workloads: list[str] = list(entry.get("workloads") or [])

    @cached_property
    def study(self) -> StudySpec:
        """The study with this point's settings applied: what the point ran with."""
        if not self.settings:
            return self.run.study
        try:
            data = apply(self.run.spec_data, self.settings)
        except FieldPathError as err:
            raise RunDirError(f"{self.run.where}: damaged point {self.id!r}: {err}") from None
        _ = self.run.study  # the stored values are checked once, with the run's study
        return self.run._validated(data, f"point {self.id!r}", checked=True)

    def workload_timeout_s(self, workload: str) -> float | None:
        """A GET workload's time limit at this point."""
        try:
            return getattr(self.study.workload(workload), "timeout_s", None)
        except KeyError:
            return None

    def request_timeout_s(self, server: str, client: str) -> float | None:
        """The time limit of the GET workload that asks `server` from `client` at this point."""
        for w in self.study.workloads:
            if any(r.server == server and r.client == client for r in getattr(w, "requests", [])):
                return getattr(w, "timeout_s", None)
        return None


@dataclass
class StoredRepetition:
    point: StoredPoint
    number: int
    dir: Path

    @property
    def where(self) -> str:
        return f"{self.point.id} #{self.number}"

    @property
    def planned(self) -> dict:
        return self.point.run.planned.get((self.point.id, self.number), {})

    @cached_property
    def info(self) -> dict:
        """rep.json, as runs write it now (rundir/upgrade.py rep_info_view), in the shape its
        readers rely on (rundir/rep_info.py; RunDirError naming the key otherwise)."""
        path = self.dir / layout.REP_INFO
        try:
            info = json.loads(path.read_bytes())
        except (OSError, ValueError) as err:
            raise RunDirError(f"{path}: unreadable ({err})") from None
        problem = rep_info_problem(info)
        if problem:
            raise RunDirError(f"{path}: damaged: {problem}")
        return upgrade.rep_info_view(info)

    def records(self) -> list[Record]:
        """records.jsonl, each record checked against its kind's schema (rundir/records.py)."""
        return [record for _, record in self.numbered_records()]

    def numbered_records(self) -> list[tuple[int, Record]]:
        """(line number, record) of records.jsonl; RunDirError naming the line of the first
        that is not a record of its kind."""
        path = self.dir / layout.RECORDS
        try:
            lines = path.read_text().splitlines()
        except (OSError, ValueError) as err:  # ValueError: bytes that are not UTF-8
            raise RunDirError(f"{path}: unreadable ({err})") from None
        out: list[tuple[int, Record]] = []
        version = self.point.run.version
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if not isinstance(entry, dict) or "kind" not in entry or "row" not in entry:
                    raise RecordError("not a {\"kind\", \"row\"} object")
                if entry["kind"] == RAW_KIND:
                    out.append((number, get_record(upgrade.get_record_view(entry["row"], version,
                                                                           self.point.workload_timeout_s))))
                else:
                    out.append((number, pass_through(entry["kind"], entry["row"])))
            except (ValueError, RecordError) as err:
                raise RunDirError(f"{path}:{number}: {err}") from None
        return out

    def pcaps(self) -> list[Path]:
        return sorted((self.dir / layout.PCAP_DIR).glob("*.pcap"))

    def quic_pcaps(self) -> list[Path]:
        """The QUIC servers' UDP captures (whole packets)."""
        return sorted((self.dir / layout.QUIC_DIR).glob("*.pcap"))

    @property
    def quic_keylog(self) -> Path:
        """The key log the repetition's QUIC and TLS clients wrote (absent: none did)."""
        return self.dir / layout.QUIC_DIR / layout.QUIC_KEYLOG
