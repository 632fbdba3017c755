"""Ctrl-C on a cluster driver: it waits until every cancelled task has ended (its node tore
the testbed down) before it marks the run interrupted and lets the process end; the node's
worker dies with the driver's job, so leaving earlier left the node's testbed behind.

Ray is faked: each unit's task waits to be cancelled, then "tears down", the first unit's
(the one the driver waits for when Ctrl-C comes) longest. The real run:
python/tests/netns/test_cluster_netns.py."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from test_resume import _stored

from congestlab.cluster import driver
from congestlab.errors import Interrupted



class FakeTask:
    """A running unit: its first item comes only after a cancel and the teardown that follows."""

    def __init__(self, teardown_s: float):
        self.teardown_s = teardown_s
        self.cancelled = threading.Event()
        self.ended_at: float | None = None

    def __iter__(self):
        return self

    def __next__(self):
        self.cancelled.wait()
        time.sleep(self.teardown_s)
        self.ended_at = time.monotonic()
        raise RuntimeError("TaskCancelledError: the task was cancelled")


class FakeRay:
    """ray as the driver uses it; `ray.remote(f).options(...).remote(...)` submits a FakeTask."""

    def __init__(self, slow_tag: str):
        self.slow_tag = slow_tag  # the tag prefix of the unit whose teardown takes longest
        self.tasks: list[FakeTask] = []

    def init(self, **kwargs):
        pass

    def cluster_resources(self):
        return {driver.RESOURCE: 2}

    def remote(self, *args):
        if not args or callable(args[0]):  # ray.remote(run_unit)
            return self
        study, quick, runs, tag, calibrate = args  # task.remote(...): a submission
        self.tasks.append(FakeTask(1.5 if tag.startswith(self.slow_tag) else 0.2))
        return self.tasks[-1]

    def options(self, **kwargs):
        return self

    def cancel(self, task):
        task.cancelled.set()

    def get(self, ref):
        return ref

    def shutdown(self):
        pass


def test_ctrl_c_waits_for_every_cancelled_task_to_end(tmp_path, monkeypatch):
    _, _, head, _ = _stored(tmp_path)
    fake = FakeRay(slow_tag=f"-s0u{head.runs[0][0].unit}a")  # the unit the driver waits for first
    monkeypatch.setattr(driver, "ray", fake)
    cluster = driver.ClusterRun(head, "127.0.0.2:1")
    units = {p.unit for p, _ in head.runs}
    assert len(units) >= 2
    # Ctrl-C while the driver waits for its units (it lands inside that wait)
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(Interrupted):
        cluster.run()
    returned_at = time.monotonic()
    assert len(fake.tasks) == len(units)
    assert all(t.ended_at is not None and t.ended_at <= returned_at for t in fake.tasks), \
        [(t.ended_at, returned_at) for t in fake.tasks]
    assert head.manifest["status"] == "interrupted"
    assert all(t["error"] and "TaskCancelledError" in t["error"] for t in cluster.record["tasks"])
