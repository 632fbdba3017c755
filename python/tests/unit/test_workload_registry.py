"""Every workload kind a spec may declare (spec/workloads.py) has a runner (workloads/)."""

from __future__ import annotations

import typing

from congestlab.spec.workloads import Workload
from congestlab.workloads import RUNNERS, runner_for


def test_every_declared_workload_kind_has_a_runner():
    union = typing.get_args(Workload)[0]
    declared = {typing.get_args(model.model_fields["kind"].annotation)[0] for model in typing.get_args(union)}
    assert declared == set(RUNNERS)
    for model in typing.get_args(union):
        kind = typing.get_args(model.model_fields["kind"].annotation)[0]
        assert runner_for(model.model_construct(kind=kind, name="w")).__name__ == RUNNERS[kind][1]
