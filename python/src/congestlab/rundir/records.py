"""The records a repetition keeps in records.jsonl, one schema per kind: what the workloads
write (congestlab/workloads/) and what the analysis reads, checked in one place. A field added
here is added for every writer and reader; for runs stored before it existed,
rundir/upgrade.py supplies its value (docs/data-format.md, "Records")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from congestlab.results import KIND_COLUMNS

# the records.jsonl kind of a GET as its client saw it (workloads/get.py); the analysis
# measures it in the capture and writes it as a `request` row
RAW_KIND = "get_raw"
# kinds whose records are result rows already: the analysis adds the point's columns only
PASS_THROUGH_KINDS = tuple(kind for kind in KIND_COLUMNS if kind not in ("request", "port") and
                           not kind.startswith("rto_"))

Scalar = str | int | float | bool | None


class GetRecord(BaseModel):
    """One measured GET (workloads/get.py), with the settings it ran with."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workload: str
    request: int  # the request's index in its workload
    server: str
    server_port: int
    server_kind: str
    client: str
    family: Literal["v4", "v6"]
    file_kib: int
    client_kind: Literal["curl", "curl-cffi", "chromium"]
    client_addr: str
    timeout_s: float  # the client's time limit: a GET that reaches it is a censored sample
    start_ts: float
    end_ts: float
    client_port: int | None
    # the run design: the families of one request in one repetition are one pair, in this
    # order; whether the previous GET's connection had closed at its server when this one
    # started, and how long this one waited for it (workloads/closed.py)
    family_pair: str | None
    family_position: int | None
    family_order: str | None
    previous_closed: bool | None
    previous_wait_ms: float | None
    # the client's own account (traffic/http_request.py RequestResult)
    url: str
    ok: bool
    http_code: int
    size_download: int
    local_port: int
    time_total_s: float
    error: str = ""
    # what it asked for and what it got (a GET that negotiated another HTTP version is not ok)
    http: Literal["1.1", "2", "3"]
    tls: bool
    http_negotiated: str | None
    tls_version: str | None
    # curl's phase times from the GET's start (traffic/http_request.py)
    time_connect_s: float | None
    time_appconnect_s: float | None
    time_pretransfer_s: float | None
    time_starttransfer_s: float | None
    # CPU per GET (testbed/cgroups.py): every task of the server's cgroup, and the host's softirq
    # time (10 ms steps), from just before the client started to just after it ended
    server_cpu_ns: int | None
    host_softirq_ms: float | None


class PassThroughRecord(BaseModel):
    """A record of a kind whose rows the workload writes whole (mgen's `background`, iperf,
    http_load's `load`, anma, ping): the kind's result columns, each a scalar."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    row: dict[str, Scalar]


Record = GetRecord | PassThroughRecord

# What makes a record one measurement within its repetition: two records of a repetition with
# the same key are one measurement written twice, never two samples (analysis/record_checks.py)
GET_KEY = ("workload", "request", "family")
PASS_THROUGH_KEYS = {
    "background": ("workload", "cls", "reversed"),
    "load": ("workload", "client", "server", "family"),
    "iperf": ("workload", "session", "client", "server", "protocol"),
    "anma": ("workload", "family"),
    "ping": ("workload", "client", "server", "family"),
}


def record_key(record: Record) -> tuple:
    """The record's kind and the values of its kind's key."""
    if isinstance(record, GetRecord):
        return (RAW_KIND, *(getattr(record, name) for name in GET_KEY))
    return (record.kind, *(record.row.get(name) for name in PASS_THROUGH_KEYS[record.kind]))


def key_text(record: Record) -> str:
    """The key as the problems name it, e.g. `get_raw workload=get request=0 family=v4`."""
    kind, *values = record_key(record)
    names = GET_KEY if isinstance(record, GetRecord) else PASS_THROUGH_KEYS[record.kind]
    return " ".join([kind, *(f"{n}={v}" for n, v in zip(names, values))])


class RecordError(ValueError):
    """A record that does not fit its kind's schema (the message names the field)."""


def get_record(row: dict) -> GetRecord:
    try:
        return GetRecord.model_validate(row)
    except ValidationError as err:
        raise RecordError(_first(err)) from None


def pass_through(kind: str, row: dict) -> PassThroughRecord:
    if kind not in PASS_THROUGH_KINDS:
        raise RecordError(f"kind {kind!r} is not a record kind (known: {', '.join((RAW_KIND, *PASS_THROUGH_KINDS))})")
    if not isinstance(row, dict):
        raise RecordError(f"row: a JSON {type(row).__name__}, not an object")
    unknown = [key for key in row if key not in KIND_COLUMNS[kind]]
    if unknown:
        raise RecordError(f"row.{unknown[0]}: not a column of results/{kind}.csv")
    try:
        return PassThroughRecord(kind=kind, row=row)
    except ValidationError as err:
        raise RecordError(_first(err)) from None


def _first(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "record"
    return f"{where}: {first['msg']}"
