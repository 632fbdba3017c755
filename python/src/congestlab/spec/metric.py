"""`[report.metrics]`: one number per point x repetition from one results/<kind>.csv column
(a *sample*: the records of one point and repetition that match a selection, reduced), and the
selectors that pick records by their dimensions (docs/reports.md; spec/report.py declares the
rest of the `[report]` section).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from congestlab.results import KIND_COLUMNS

Scalar = str | int | float | bool
# dimension -> a value or a list of values (any of them)
Selector = dict[str, Scalar | list[Scalar]]
Reducer = Literal["mean", "sum", "min", "max", "median", "count", "first"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MetricSpec(_Strict):
    """One number per point x repetition, from one results/<kind>.csv column."""

    kind: str = Field(description="results table: request, port, background, load, iperf, anma, ping")
    column: str = Field(description="column of results/<kind>.csv reduced to the sample")
    label: str = Field(default="", description="axis and header text; default: the metric's name")
    unit: str = Field(default="", description="shown after the label, e.g. Mbit/s")
    where: Selector = Field(default_factory=dict, description="records kept, e.g. {protocol = \"tcp\"}")
    per_repetition: Reducer = Field(default="mean", description="records of one point x repetition -> one number")
    divide_by: str | None = Field(default=None, description="a column: sample = reduce(column) / reduce(divide_by)")
    divide_where: Selector = Field(
        default_factory=dict, description="the denominator's records: the cell's selection with these keys replaced")
    subtract: str | None = Field(default=None, description="a column: sample = reduce(column) - reduce(subtract)")
    subtract_where: Selector = Field(
        default_factory=dict, description="the subtrahend's records: the cell's selection with these keys replaced")
    absolute: bool = Field(default=False, description="the sample's absolute value, e.g. |a - b| with subtract")
    scale: float = Field(default=1.0, description="the sample is multiplied by this (e.g. 100 for a percentage)")
    digits: int = Field(default=2, ge=0, le=6, description="decimals shown")
    censored: Selector = Field(
        default_factory=dict, description="records known only to exceed a limit, e.g. {ok = false} for a GET that "
        "timed out: the metric's where with these keys replaced; a table cell counts them as \"> limit\"")
    censored_at: str = Field(default="", description="field path of that limit in seconds (e.g. "
                             "workloads.get.timeout_s), read from each point's settings or the spec")

    @model_validator(mode="after")
    def _columns(self) -> "MetricSpec":
        if self.kind not in KIND_COLUMNS:
            raise ValueError(f"kind {self.kind!r} is not a results table; known: {', '.join(KIND_COLUMNS)}")
        for name in filter(None, (self.column, self.divide_by, self.subtract)):
            if name not in KIND_COLUMNS[self.kind]:
                raise ValueError(f"column {name!r} is not in results/{self.kind}.csv")
        if self.divide_where and not self.divide_by:
            raise ValueError("divide_where needs divide_by")
        if self.subtract_where and not self.subtract:
            raise ValueError("subtract_where needs subtract")
        if self.divide_by and self.subtract:
            raise ValueError("give divide_by or subtract, not both")
        if bool(self.censored) != bool(self.censored_at):
            raise ValueError("censored and censored_at go together")
        return self

    def operand(self) -> tuple[str | None, Selector]:
        """The second column a sample is combined with, and its records' selection."""
        if self.subtract:
            return self.subtract, self.subtract_where
        return self.divide_by, self.divide_where

    def title(self, name: str) -> str:
        label = self.label or name
        return f"{label} ({self.unit})" if self.unit else label
