"""Ray is optional: nothing of it is imported unless --cluster is given."""

from __future__ import annotations

import subprocess
import sys


def test_no_ray_without_cluster():
    code = ("import sys; import congestlab.cli, congestlab.runner, congestlab.cluster, congestlab.cluster.node; "
            "from congestlab.cli import app; "
            "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_task_retries_are_off_and_explicit():
    from congestlab.cluster import driver

    assert driver.ATTEMPTS == 2  # the first, and one explicit re-submission recorded in the manifest
    source = open(driver.__file__).read()
    assert "max_retries=0" in source and "retry_exceptions=False" in source


def test_a_point_on_nodes_with_different_calibrations_is_flagged(tmp_path):
    from test_resume import _stored

    from congestlab.cluster.driver import ClusterRun

    spec, run_dir, head, _ = _stored(tmp_path)
    cluster = ClusterRun(head, "127.0.0.2:1")
    p0, p1 = head.points[0].id, head.points[1].id
    cluster.record["nodes"] = {"a/1": {"calibration": {"v4": 95.1}}, "b/2": {"calibration": {"v4": 91.0}},
                               "c/3": {"calibration": {"v4": 95.1}}}
    cluster.record["runs"] = {f"{p0}#1": "a/1", f"{p0}#2": "b/2", f"{p1}#1": "a/1", f"{p1}#2": "c/3"}
    cluster._flag_mixed_nodes()
    flagged = [c for c in head.checks if c.name.startswith("one_calibration@")]
    assert [c.name for c in flagged] == [f"one_calibration@{p0}"] and not flagged[0].ok
    assert cluster.record["points"][p1] == ["a/1", "c/3"]
