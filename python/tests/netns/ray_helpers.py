"""A local Ray cluster of separate `ray start --block` processes (head + workers), each with
its own temp dir, node-local work dir and one `congestlab_testbed`; on loopback addresses
only; always stopped by process group (the group of the `ray start` we spawned)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = str(Path(sys.executable).parent / "ray")


class LocalCluster:
    def __init__(self, base: Path, nodes: int = 2, port: int = 0):
        self.base = base
        self.nodes = nodes
        self.port = port or 6400 + os.getpid() % 500
        self.address = f"127.0.0.2:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.pgids: list[int] = []  # every `ray start` we spawned leads its own process group
        # Ray's sockets live in its temp dir: AF_UNIX paths must stay under 108 bytes
        self.ray_tmp = Path(tempfile.mkdtemp(prefix="clray-"))

    def _start(self, i: int, head: bool) -> subprocess.Popen:
        node_dir = self.base / f"node{i}"
        node_dir.mkdir(parents=True, exist_ok=True)
        argv = [RAY, "start", "--block", "--num-cpus=1", "--object-store-memory=200000000",
                "--resources", '{"congestlab_testbed": 1}', f"--node-ip-address=127.0.0.{2 + i}",
                "--disable-usage-stats"]
        if head:
            argv += ["--head", f"--port={self.port}", f"--temp-dir={self.ray_tmp}", "--include-dashboard=false"]
        else:
            argv += [f"--address={self.address}"]
        env = os.environ | {"CONGESTLAB_WORKDIR": str(node_dir / "work"), "RAY_USAGE_STATS_ENABLED": "0"}
        log = open(node_dir / "ray-start.log", "w")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.pgids.append(proc.pid)
        return proc

    def __enter__(self) -> LocalCluster:
        try:
            self.procs.append(self._start(0, head=True))
            self._wait_nodes(1)
            for i in range(1, self.nodes):
                self.procs.append(self._start(i, head=False))
            self._wait_nodes(self.nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_nodes(self, n: int, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        probe = ("import ray,sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                 "print(int(ray.cluster_resources().get('congestlab_testbed', 0)))")
        while time.monotonic() < deadline:
            for proc in self.procs:
                assert proc.poll() is None, f"ray start exited {proc.returncode}: see {self.base}/node*/ray-start.log"
            try:  # the head's GCS first (ray.init would retry on a closed port for long)
                socket.create_connection(("127.0.0.2", self.port), timeout=1).close()
            except OSError:
                time.sleep(0.5)
                continue
            try:
                out = subprocess.run([sys.executable, "-c", probe, self.address], capture_output=True, text=True,
                                     timeout=60)
            except subprocess.TimeoutExpired:
                continue
            if out.returncode == 0 and out.stdout.strip() == str(n):
                return
            time.sleep(1)
        raise TimeoutError(f"the local Ray cluster did not reach {n} nodes in {timeout_s} s")

    def stop(self) -> None:
        for proc in reversed(self.procs):  # workers first, then the head
            # a worker's `ray start` ends 1 s after SIGTERM; the head's outlived it by more than
            # 30 s (with its autoscaler monitor.py), so a longer wait only delayed its SIGKILL
            for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=wait_s)
                except subprocess.TimeoutExpired:
                    continue
                if not _group_alive(proc.pid):
                    break
            if _group_alive(proc.pid):  # daemons of that `ray start` outliving it
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.procs = []
        shutil.rmtree(self.ray_tmp, ignore_errors=True)

    def __exit__(self, *exc) -> None:
        self.stop()

    def group_pids(self) -> list[int]:
        return [pid for pgid in self.pgids for pid in _group_members(pgid)]


def _group_members(pgid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(proc.name))
    return found


def _group_alive(pgid: int) -> bool:
    return bool(_group_members(pgid))
