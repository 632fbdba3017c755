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
