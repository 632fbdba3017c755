"""What every workload runner offers the runner (runner/), and what it gets from it.

Background runners (mgen, http_load) start, report what they achieved inside each
measuring window while they keep running, and stop; measuring runners (get, iperf, anma,
ping) run once per point and repetition and end by themselves. Both return records:
(result kind, row) pairs whose rows have the kind's columns (congestlab/results.py).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from congestlab.fidelity import Check
from congestlab.spec.models import StudySpec
from congestlab.spec.servers import ServerSpec

Record = tuple[str, dict]


@dataclass
class RunningServer:
    spec: ServerSpec
    port: int
    log_path: Path | None = None  # a user-stack server's event log (workloads/closed.py)
    # its cgroup's CPU time so far, ns (testbed/cgroups.py); None: not accounted
    cpu_ns: Callable[[], int | None] | None = None
    exited: Callable[[], int | None] | None = None  # its exit status once its process ended


@dataclass
class Context:
    """The testbed and the servers a workload may address, for one point."""

    tb: object  # congestlab.testbed.Testbed
    run_dir: Path
    study: StudySpec  # the point's resolved study
    servers: dict[str, RunningServer] = field(default_factory=dict)
    # every background process is bounded: it stops by itself after this long
    bound_s: float = 600.0
    point_id: str = ""
    # carried from run to run by the runner: the last measured GET's connection, so the next
    # GET starts only once it has closed (workloads/closed.py)
    previous_get: dict = field(default_factory=dict)
    # the run's CA certificate, which a TLS GET trusts (servers/tls.py); None: no TLS server
    ca_file: str | None = None
    # the run's server certificate's SPKI hash, which the browser is told to trust (servers/tls.py)
    tls_spki: str | None = None

    def address(self, node: str, family: str) -> str:
        return self.tb.address(node, family)

    def server_address(self, server: str, family: str) -> str:
        return self.tb.address(self.servers[server].spec.node, family)


class _WorkloadRunner(ABC):
    def __init__(self, spec, ctx: Context, log_dir: Path):
        self.spec = spec
        self.ctx = ctx
        self.log_dir = log_dir
        self.argvs: list[list[str]] = []

    @classmethod
    def host_pairs(cls, spec, study) -> set[tuple[str, str]]:
        """(source, destination) hosts its traffic joins: each pair of kernel hosts must
        answer ping over both families before anything runs."""
        return set()

    @classmethod
    def client_of(cls, spec, server_name: str) -> str | None:
        """The host it fetches `server_name`'s files from, when it talks to that server
        (the server's ready and congestion-control checks run from there)."""
        return None

    @classmethod
    def measured_families(cls, spec, server_name: str) -> set[str]:
        """The families its measured GETs ask `server_name` over (its ready check covers them)."""
        return set()

    @classmethod
    def socket_ccs(cls, spec) -> set[str]:
        """Congestion controls its flows select per socket (the kernel must offer them)."""
        return set()

    @classmethod
    def tools(cls, spec) -> set[str]:
        """The programs it drives whose versions the manifest records (workloads.TOOL_VERSIONS)."""
        return set()

    @classmethod
    def leansim_background(cls, spec, study, lean_server: str, where: str) -> list[dict] | None:
        """Its traffic as background flows of a leansim scenario (simulate/mapping.py,
        crates/leansim/src/scenario.rs); None: leansim does not model it. A setting it cannot
        model raises a SpecError naming that field under `where` (the workload's field path)."""
        return None


class Background(_WorkloadRunner):
    @abstractmethod
    def start(self) -> None: ...

    def open_window(self, measured_bytes: float | None = None) -> None:
        """A measuring window begins now (a runner may note where its logs stand); the
        window's measured workloads move at most `measured_bytes` (None: not known)."""

    @abstractmethod
    def measure(self, window_epoch_s: tuple[float, float]) -> tuple[list[Record], list[Check]]:
        """Records and fidelity checks of the window, while the workload keeps running."""

    def lifetime_checks(self) -> list[Check]:
        """Fidelity over the whole time it ran (from the first window to the last), called
        before stop(): a TCP background yields to a measured transfer inside a window and
        catches up after it, so a short window alone would misjudge what it offered."""
        return []

    @abstractmethod
    def stop(self) -> None: ...

    def describe(self) -> dict:
        return {"kind": self.spec.kind, "argv": self.argvs}


class Measuring(_WorkloadRunner):
    @abstractmethod
    def run(self, repetition: int) -> tuple[list[Record], list[Check]]:
        """Run to completion (bounded in time) and return the records."""

    @classmethod
    def time_bound_s(cls, spec, study) -> float:
        """How long run() may take at most (bounds the background's own lifetime)."""
        return 60.0

    @classmethod
    def bytes_per_run(cls, spec) -> float | None:
        """The most bytes one run moves, when known before it runs (a background's rate
        check needs it, fidelity.background_min_window_s); None: not known."""
        return None


class OneClientOneServer:
    """For a workload whose `client` host talks to one `server` (http_load, anma)."""

    @classmethod
    def host_pairs(cls, spec, study) -> set[tuple[str, str]]:
        return {(spec.client, study.server(spec.server).node)}

    @classmethod
    def client_of(cls, spec, server_name: str) -> str | None:
        return spec.client if spec.server == server_name else None
