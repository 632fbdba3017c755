"""A cluster run submits its tasks longest first (cluster/submit_order.py): by a previous
run's unit times when given (`--order-from`), else by planned repetitions; the driver
(cluster/driver.py, Ray faked) submits them one after another in that order and records it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from test_resume import _stored

from congestlab.cluster import driver
from congestlab.cluster.submit_order import previous_times, submission_order
from congestlab.errors import ClusterError


def _units(**reps):
    return {key: [(f"p{key}", r) for r in range(1, n + 1)] for key, n in reps.items()}


def test_without_a_previous_run_the_most_repetitions_go_first_ties_in_study_order():
    order = submission_order(_units(u0=2, u1=6, u2=3, u3=6))
    assert [(o.task, o.estimate, o.basis) for o in order] == [
        ("u1", 6.0, "planned"), ("u3", 6.0, "planned"), ("u2", 3.0, "planned"), ("u0", 2.0, "planned")]


def test_a_previous_runs_unit_times_order_the_tasks():
    previous = previous_times([("u0", 100.0), ("u1", 10.0), ("u2a1", 30.0), ("u2a2", 50.0)])
    assert previous == {"u0": 100.0, "u1": 10.0, "u2": 80.0}  # a task's attempts summed
    order = submission_order(_units(u0=2, u1=6, u2=3, u3=4), previous)
    assert [o.task for o in order] == ["u0", "u2", "u3", "u1"]
    u3 = next(o for o in order if o.task == "u3")  # not in the previous run: its mean per repetition
    assert u3.basis == "previous run, mean per repetition" and u3.estimate == pytest.approx(190.0 / 11 * 4)


def test_rounds_of_a_unit_take_their_share_of_its_previous_time():
    # placement "repetition": u0r1, u0r2 are rounds of unit u0; the previous (local) run timed u0 whole
    order = submission_order({"u0r1": [("a", 1), ("b", 1)], "u0r2": [("a", 2)], "u1r1": [("c", 1)]},
                             {"u0": 90.0, "u1": 70.0})
    assert [(o.task, round(o.estimate, 6), o.basis) for o in order] == [
        ("u1r1", 70.0, "previous run, share of its unit"),
        ("u0r1", 60.0, "previous run, share of its unit"), ("u0r2", 30.0, "previous run, share of its unit")]


class FailingRay:
    """ray as the driver uses it: every submitted task fails at once (so the driver retries
    once and ends with repetitions missing); the tags are kept in submission order."""

    def __init__(self):
        self.tags: list[str] = []

    def init(self, **kwargs):
        pass

    def cluster_resources(self):
        return {driver.RESOURCE: 1}

    def remote(self, *args):
        if not args or callable(args[0]):
            return self
        self.tags.append(args[3])
        return iter(())  # next() raises StopIteration: the task "failed"

    def options(self, **kwargs):
        return self

    def get(self, ref):
        return ref

    def shutdown(self):
        pass


def test_the_driver_submits_longest_first_and_records_the_order(tmp_path, monkeypatch):
    _, _, head, _ = _stored(tmp_path)
    units = list(dict.fromkeys(f"u{p.unit}" for p, _ in head.runs))
    assert len(units) >= 2
    previous = {u: 10.0 * (i + 1) for i, u in enumerate(units)}  # the last unit of the study is the longest
    fake = FailingRay()
    monkeypatch.setattr(driver, "ray", fake)
    cluster = driver.ClusterRun(head, "127.0.0.2:1", previous_s=previous, previous_run="prev")
    with pytest.raises(ClusterError, match="missing"):
        cluster.run()
    first_attempts = [t.removeprefix("-s0").removesuffix("a1") for t in fake.tags if t.endswith("a1")]
    assert first_attempts == list(reversed(units))
    record = cluster.record["submission"]
    assert record["by"] == "unit times of prev"
    assert [o["task"] for o in record["order"]] == list(reversed(units))


def test_order_from_needs_cluster(tmp_path):
    out = subprocess.run([sys.executable, "-m", "congestlab.cli", "reproduce", "rto", "--quick",
                          "--order-from", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == ("congestlab: --order-from: orders a cluster run's tasks; "
                                                          "go with --cluster")
