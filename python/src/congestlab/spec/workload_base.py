"""What every workload model of a spec shares (spec/workloads.py, spec/get_workload.py): strict
fields, a name, and the questions the spec's checks ask of every kind."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from congestlab.spec.request_timeouts import ChosenTimeout
from congestlab.spec.workload_ends import Crossing, Named

if TYPE_CHECKING:
    from congestlab.spec.models import StudySpec

Family = Literal["v4", "v6"]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # as spec/models.py Strict


class WorkloadModel(StrictModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,15}$", description="referred to by experiments and axes")

    @property
    def measures_gets(self) -> bool:
        """Its GETs are the measured requests, each waiting up to its `timeout_s` (the get kind)."""
        return False

    @property
    def long_lived(self) -> bool:
        """A background kept running from point to point while its settings stay the same."""
        return False

    def named(self) -> list[Named]:
        """The hosts and servers it names, in the order spec/validate.py checks them."""
        return []

    def crossings(self) -> list[Crossing]:
        """The ends its traffic goes between (each pair on two nodes)."""
        return []

    def check_study(self, study: "StudySpec") -> None:
        """Its own checks against the whole study (ValueError naming the field), after `named`."""

    def servers_asked(self) -> list[str]:
        """The servers it talks to at a point: the point runs them and captures their traffic."""
        return []

    def chosen_timeout(self, level: str | None, published: list[dict]) -> ChosenTimeout | None:
        """Its timeout at a point of `level`, when chosen from the published delays."""
        return None
