"""`congestlab reproduce anma`: the ANMA slides' test (seed 004) on the ipv6 preset's
routed topology with no background: a 4 KB file, 10,000 requests, 1,000 concurrent
(--quick: 1,000 and 100), patterns A-E (v6:v4 = 1:1, 4:1, 1:4, 1:0, 0:1), against Apache
and, when leanweb is built, the lean server. dualbench runs in the client namespace."""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from congestlab.bench.anma_report import PATTERNS, pattern_json, write_report
from congestlab.bench.results import read_report
from congestlab.errors import CongestlabError, Interrupted, TestbedError, ToolError
from congestlab.paths import rust_binary
from congestlab.rundir import FORMAT_VERSION, environment, new_run_dir, prepare_out_dir, write_manifest
from congestlab.runner import require_root, sigterm_as_interrupt
from congestlab.servers.factory import make_server
from congestlab.servers.files import url_path, write_files
from congestlab.spec import load_preset
from congestlab.spec.models import ServerSpec, TopologySpec
from congestlab.testbed import Testbed, new_prefix

FILE_KIB = 4
TIMEOUT_S = 5.0
CLIENT = "client"
FULL = (10_000, 1_000)
QUICK = (1_000, 100)
# Client-namespace knobs (our namespace only): 5 patterns x 10,000 connections within a
# minute would exhaust the default ephemeral ports while closed ones sit in TIME_WAIT.
CLIENT_SYSCTLS = ["net.ipv4.ip_local_port_range=1024 65000", "net.ipv4.tcp_tw_reuse=1"]


def _servers(preset, include_lean: bool) -> list[ServerSpec]:
    servers = [ServerSpec(name="apache", kind="apache", node="server", cc="cubic", files_kib=[FILE_KIB])]
    if include_lean:
        lean = next(s for s in preset.servers if s.kind == "lean")
        # the connection table sized for 1,000 concurrent: leanweb's default cap (1,024)
        # also counts its own 1 s TIME-WAITs, which ~1,500 closes/s keep above a thousand
        knobs = lean.knobs | {"max_connections": 8192, "max_half_open": 2048}
        servers.append(lean.model_copy(update={"files_kib": [FILE_KIB], "knobs": knobs}))
    return servers


def _topology(preset, servers: list[ServerSpec]) -> TopologySpec:
    """The preset's routers, client and the servers' nodes; the MGEN hosts are left out."""
    keep = {CLIENT} | {s.node for s in servers}
    nodes = [n for n in preset.topology.nodes if n.kind == "router" or n.name in keep]
    return preset.topology.model_copy(update={"nodes": nodes})


def _lean_available() -> bool:
    try:
        rust_binary("leanweb")
        return True
    except ToolError:
        return False


def _dualbench(tb: Testbed, argv: list[str], timeout_s: float) -> subprocess.CompletedProcess:
    proc = tb.run(CLIENT, argv, timeout_s=timeout_s, check=False)
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    return proc


def _addresses(tb: Testbed, node: str, n6: int, n4: int) -> list[str]:
    return [tb.address(node, "v6")] * n6 + [tb.address(node, "v4")] * n4


def _ready(tb: Testbed, binary: Path, server: ServerSpec, work: Path, timeout_s: float = 15.0) -> None:
    """Both families serve the whole file before anything is measured."""
    addr_file = work / f"{server.name}-ready.addresses"
    addr_file.write_text("\n".join(_addresses(tb, server.node, 1, 1)) + "\n")
    out = work / f"{server.name}-ready.json"
    argv = [str(binary), "anma", "--addresses", str(addr_file), "--port", str(server.port), "--path",
            url_path(FILE_KIB), "--requests", "4", "--concurrency", "2", "--timeout", "2s", "--json", str(out)]
    deadline = time.monotonic() + timeout_s
    while True:
        _dualbench(tb, argv, 30)
        all_ = read_report(out).family("all")
        if all_.normal == 4:
            return
        if time.monotonic() > deadline:
            raise TestbedError(f"server {server.name} not ready: {all_.normal}/4 NORMAL, other {all_.other_kinds}")
        time.sleep(0.3)


def _run_server(tb: Testbed, binary: Path, server: ServerSpec, run_dir: Path, requests: int, concurrency: int,
                record: dict, temp_dirs: list[Path]) -> None:
    docroot = Path(tempfile.mkdtemp(prefix=f"congestlab-{tb.prefix}-anma-"))
    docroot.chmod(0o755)  # Apache's workers (www-data) must read it
    temp_dirs.append(docroot)
    record["files_sha256"] = {str(k): v for k, v in write_files(docroot, [FILE_KIB]).items()}
    srv = make_server(server, tb, run_dir, docroot)
    record["version"] = srv.version()
    try:
        srv.start()
        srv.wait_started()
        record["argv"] = srv.argv
        _ready(tb, binary, server, run_dir / "logs")
        rounds = math.ceil(requests / concurrency)
        for name, n6, n4 in PATTERNS:
            addr_file = run_dir / "patterns" / f"{server.name}-{name}.addresses"
            addr_file.write_text(f"# pattern {name}: IPv6:IPv4 = {n6}:{n4}\n"
                                 + "\n".join(_addresses(tb, server.node, n6, n4)) + "\n")
            out = pattern_json(run_dir, server.name, name)
            argv = [str(binary), "anma", "--addresses", str(addr_file), "--port", str(server.port),
                    "--path", url_path(FILE_KIB), "--requests", str(requests), "--concurrency", str(concurrency),
                    "--timeout", f"{TIMEOUT_S:g}s", "--seed", "4", "--json", str(out)]
            proc = _dualbench(tb, argv, timeout_s=rounds * TIMEOUT_S * 2 + 60)
            (run_dir / "logs" / f"dualbench-{server.name}-{name}.txt").write_text(proc.stdout)
            record["patterns"][name] = {"argv": ["ip", "netns", "exec", tb.ns(CLIENT), *argv],
                                        "json": str(out.relative_to(run_dir))}
            time.sleep(1.0)  # let the previous pattern's connections finish closing
    finally:
        srv.stop()


def reproduce(out: Path | None, quick: bool) -> Path:
    require_root()
    binary = rust_binary("dualbench")
    requests, concurrency = QUICK if quick else FULL
    preset = load_preset("ipv6")
    lean = _lean_available()
    servers = _servers(preset, include_lean=lean)
    topology = _topology(preset, servers)
    prefix = new_prefix()
    run_dir = prepare_out_dir(out) if out else new_run_dir(Path("runs"), "anma", prefix)
    (run_dir / "patterns").mkdir(exist_ok=True)
    print(f"run directory: {run_dir}", file=sys.stderr)
    manifest: dict = {
        "format_version": FORMAT_VERSION,
        "study": "anma",
        "status": "running",
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": sys.argv,
        "environment": environment(),
        "config": {"file_kib": FILE_KIB, "requests": requests, "concurrency": concurrency, "timeout_s": TIMEOUT_S,
                   "quick": quick, "client": CLIENT, "topology_from": "preset ipv6 (no background)",
                   "client_sysctls": CLIENT_SYSCTLS,
                   "lean": "included" if lean else "leanweb not built: Apache only"},
        "tools": {"dualbench": subprocess.run([str(binary), "--version"], capture_output=True, text=True,
                                              timeout=10).stdout.strip()},
        "servers": {s.name: {"kind": s.kind, "node": s.node, "port": s.port, "patterns": {}} for s in servers},
    }
    write_manifest(run_dir, manifest)
    temp_dirs: list[Path] = []
    kernel_cc = {CLIENT: "cubic", "server": "cubic"}
    try:
        with sigterm_as_interrupt():
            with Testbed(topology, prefix=prefix, kernel_cc=kernel_cc, run_dir=str(run_dir)) as tb:
                manifest["testbed"] = tb.describe() | {"setup_s": round(tb.setup_s, 3)}
                tb.run(CLIENT, ["sysctl", "-qw", *CLIENT_SYSCTLS])
                for server in servers:
                    record = manifest["servers"][server.name]
                    try:
                        _run_server(tb, binary, server, run_dir, requests, concurrency, record, temp_dirs)
                    except CongestlabError as err:
                        if server.kind == "apache":
                            raise
                        record["error"] = str(err)  # the lean server's failure is a result, not a crash
                    write_manifest(run_dir, manifest)
    except KeyboardInterrupt:
        _fail(run_dir, manifest, "interrupted", "interrupted by Ctrl-C; testbed torn down")
        raise Interrupted("interrupted by Ctrl-C; testbed torn down; run directory marked interrupted") from None
    except BaseException as err:
        _fail(run_dir, manifest, "interrupted" if isinstance(err, Interrupted) else "failed",
              f"{type(err).__name__}: {err}" if not isinstance(err, CongestlabError) else str(err))
        raise
    finally:
        for path in temp_dirs:
            shutil.rmtree(path, ignore_errors=True)
    manifest["status"] = "complete"
    manifest["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_manifest(run_dir, manifest)
    report, rows = write_report(run_dir, manifest)
    _print_tables(rows)
    print(f"report: {report}")
    return run_dir


def _fail(run_dir: Path, manifest: dict, status: str, message: str) -> None:
    manifest["status"] = status
    manifest["error"] = message
    write_manifest(run_dir, manifest)


def _print_tables(rows_by_server: dict[str, list[list[str]]]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=180)  # 16 columns: never squeeze them to a pipe's 80
    cols = ("Pat", "v6:v4", "sent v6", "sent v4", "NORM v6", "NORM v4", "RST v6", "RST v4", "TO v6", "TO v4",
            "ref v6", "ref v4", "oth v6", "oth v4", "est µs v6", "est µs v4", "cont ms v6", "cont ms v4")
    for server, rows in rows_by_server.items():
        table = Table(title=f"ANMA {server}: requests, closed status, establishment and continuation")
        for col in cols:
            table.add_column(col, justify="right")
        for row in rows:
            table.add_row(*row)
        console.print(table)
