"""rep.json, the record a repetition writes last (docs/data-format.md, "rep.json"): the shape
of what its readers take from it (which server instance served, when the captures ran,
tcpdump's own counts), so a damaged one is one line naming the key, not a wrong number or a
traceback later. Keys no reader takes are left as they are."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, NonNegativeInt, ValidationError, field_validator


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class TcpdumpCounts(_Loose):
    """tcpdump's own counts when it stopped (capture/tcpdump.py parse_drop_counts); absent
    when it printed none."""

    packets_captured: NonNegativeInt | None = None
    packets_received_by_filter: NonNegativeInt | None = None
    packets_dropped_by_kernel: NonNegativeInt | None = None


class CaptureInfo(_Loose):
    argv: list[str] = []
    tcpdump: TcpdumpCounts = TcpdumpCounts()


class RepInfoShape(_Loose):
    servers: dict[str, str] = {}
    window_epoch_s: list[float] | None = None
    capture_epoch_s: list[float] | None = None
    captures: dict[str, CaptureInfo] = {}

    @field_validator("window_epoch_s", "capture_epoch_s")
    @classmethod
    def _span(cls, value: list[float] | None) -> list[float] | None:
        if value is not None and (len(value) != 2 or not all(math.isfinite(v) and v > 0 for v in value)
                                  or value[1] < value[0]):
            raise ValueError("not a [start, end] span of epoch seconds")
        return value


def rep_info_problem(info: object) -> str | None:
    """Why rep.json's content cannot be read as one (the key and what is wrong); None when it can."""
    if not isinstance(info, dict):
        return f"a JSON {type(info).__name__}, not an object"
    try:
        RepInfoShape.model_validate(info)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "rep.json"
        return f"{where}: {first['msg'].removeprefix('Value error, ')}"
    return None
