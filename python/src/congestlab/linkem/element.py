"""Start, query and stop one linkem process (one direction of one link) inside a namespace.

start(): launch `ip netns exec NS linkem ...`, wait for its ready line, then add the
iptables/ip6tables NFQUEUE rule in that namespace's FORWARD chain (never the root
namespace). stop(): remove the rules first (so no packet is queued to a dead listener),
then SIGTERM the PID and read the final counters. Order matters: a NFQUEUE rule without a
listener drops every packet it matches.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from congestlab.errors import NotRootError, SpecError, TestbedError, ToolError
from congestlab.paths import rust_binary

RULE_COMMENT_PREFIX = "congestlab-linkem"
EXIT_NO_NFQUEUE = 3
CHAINS = ("FORWARD", "OUTPUT", "INPUT")


@dataclass(frozen=True)
class GilbertElliott:
    """Bursty loss: p = P(good->bad), r = P(bad->good) per packet; loss per state."""

    p: float
    r: float
    loss_good: float = 0.0
    loss_bad: float = 1.0


def _check_probability(where: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise SpecError(where, f"must be a probability in [0, 1], got {value}")


@dataclass
class LinkemElement:
    """One direction of an emulated link: packets forwarded by `netns` from `in_iface`
    (to `out_iface`, and/or matching the extra iptables `match` arguments) are delayed by
    `delay_ms` ± `jitter_ms`, lost with probability `loss`, and so on."""

    netns: str
    queue_num: int
    delay_ms: float
    in_iface: str | None = None
    out_iface: str | None = None
    match: list[str] = field(default_factory=list)
    jitter_ms: float = 0.0
    reorder: bool = False
    loss: float = 0.0
    gilbert_elliott: GilbertElliott | None = None
    duplicate: float = 0.0
    seed: int = 1
    max_held: int = 10_000
    families: tuple[str, ...] = ("ipv4", "ipv6")
    # where its stats, stdout and stderr go; None: a temporary directory made by start() and
    # removed by stop() (so a plan or a check makes nothing on disk)
    log_dir: Path | None = None
    # FORWARD on a router; OUTPUT (-o only) / INPUT (-i only) for a host's own traffic
    chain: str = "FORWARD"
    ready_timeout_s: float = 5.0

    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _rules_added: list[list[str]] = field(default_factory=list, init=False, repr=False)
    _final_stats: dict | None = field(default=None, init=False, repr=False)
    _owns_log_dir: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        where = f"linkem[{self.netns} q{self.queue_num}]"
        if not 0 <= self.queue_num <= 65535:
            raise SpecError(where, f"queue_num must be 0..65535, got {self.queue_num}")
        for name in ("delay_ms", "jitter_ms"):
            if getattr(self, name) < 0:
                raise SpecError(f"{where}.{name}", f"must be >= 0, got {getattr(self, name)}")
        _check_probability(f"{where}.loss", self.loss)
        _check_probability(f"{where}.duplicate", self.duplicate)
        if self.gilbert_elliott is not None:
            for name in ("p", "r", "loss_good", "loss_bad"):
                _check_probability(f"{where}.gilbert_elliott.{name}", getattr(self.gilbert_elliott, name))
            if self.gilbert_elliott.r == 0:
                raise SpecError(f"{where}.gilbert_elliott.r", "must be > 0")
        if self.max_held < 1:
            raise SpecError(f"{where}.max_held", "must be >= 1")
        if not (self.in_iface or self.out_iface or self.match):
            raise SpecError(where, "give in_iface, out_iface or match (else every forwarded packet is queued)")
        if self.chain not in CHAINS:
            raise SpecError(f"{where}.chain", f"must be one of {', '.join(CHAINS)}, got {self.chain!r}")
        if self.chain == "OUTPUT" and self.in_iface or self.chain == "INPUT" and self.out_iface:
            raise SpecError(f"{where}.chain", f"{self.chain} matches only {'-o' if self.chain == 'OUTPUT' else '-i'}")
        unknown = set(self.families) - {"ipv4", "ipv6"}
        if unknown or not self.families:
            raise SpecError(f"{where}.families", f"must be ipv4 and/or ipv6, got {self.families}")
        if self.log_dir is not None:
            self.log_dir = Path(self.log_dir)

    # --- commands as data (inspectable before anything runs) ---
    @property
    def stats_path(self) -> Path:
        return self._log_file("stats.json")

    @property
    def stdout_path(self) -> Path:
        return self._log_file("out")

    @property
    def stderr_path(self) -> Path:
        return self._log_file("err")

    def _log_file(self, suffix: str) -> Path:
        if self.log_dir is None:
            raise TestbedError(f"linkem q{self.queue_num} in {self.netns}: no log_dir until start() makes one")
        return self.log_dir / f"linkem-q{self.queue_num}.{suffix}"

    def linkem_argv(self, binary: str | Path = "linkem") -> list[str]:
        argv = [
            str(binary), "--queue-num", str(self.queue_num),
            "--delay-ms", repr(float(self.delay_ms)),
            "--jitter-ms", repr(float(self.jitter_ms)),
            "--loss", repr(float(self.loss)),
            "--duplicate", repr(float(self.duplicate)),
            "--seed", str(self.seed),
            "--max-held", str(self.max_held),
            "--stats", str(self.stats_path),
        ]
        if self.reorder:
            argv.append("--reorder")
        ge = self.gilbert_elliott
        if ge is not None:
            argv += ["--ge-p", repr(ge.p), "--ge-r", repr(ge.r),
                     "--ge-loss-good", repr(ge.loss_good), "--ge-loss-bad", repr(ge.loss_bad)]
        return ["ip", "netns", "exec", self.netns, *argv]

    def rule_argvs(self, action: str) -> list[list[str]]:
        """iptables/ip6tables commands (inside the namespace) that add ("-A") or delete ("-D") the rule."""
        assert action in ("-A", "-D")
        spec: list[str] = []
        if self.in_iface:
            spec += ["-i", self.in_iface]
        if self.out_iface:
            spec += ["-o", self.out_iface]
        spec += list(self.match)
        spec += ["-m", "comment", "--comment", f"{RULE_COMMENT_PREFIX}-q{self.queue_num}",
                 "-j", "NFQUEUE", "--queue-num", str(self.queue_num)]
        tools = {"ipv4": "iptables", "ipv6": "ip6tables"}
        return [["ip", "netns", "exec", self.netns, tools[f], "-w", action, self.chain, *spec]
                for f in self.families]

    # --- lifecycle ---
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        if os.geteuid() != 0:
            raise NotRootError("linkem needs root (network namespaces, NFQUEUE)")
        if self._proc is not None:
            raise TestbedError(f"linkem q{self.queue_num} in {self.netns} already started")
        binary = rust_binary("linkem")
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix=f"linkem-{self.netns}-q{self.queue_num}-"))
            self._owns_log_dir = True
        argv = self.linkem_argv(binary)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # a stats file left by an earlier element in the same log_dir would make stats() wait for
        # a snapshot number this process has not reached yet
        self.stats_path.unlink(missing_ok=True)
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self._proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
        try:
            self._wait_ready(argv)
            for rule in self.rule_argvs("-A"):
                _run(rule)
                self._rules_added.append(rule)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, argv: list[str]) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while time.monotonic() < deadline:
            rc = self._proc.poll()
            if rc is not None:
                stderr = self.stderr_path.read_text(errors="replace")
                self._proc = None
                if rc == EXIT_NO_NFQUEUE:
                    raise TestbedError(stderr.strip() or "linkem: NFQUEUE unavailable")
                raise ToolError(argv, rc, stderr)
            first = self.stdout_path.read_text(errors="replace").split("\n", 1)
            if len(first) == 2 and '"ready"' in first[0]:
                return
            time.sleep(0.02)
        raise TestbedError(f"linkem q{self.queue_num} in {self.netns}: no ready line in {self.ready_timeout_s} s")

    def stats(self, timeout_s: float = 2.0) -> dict:
        """Fresh counters from the running process (SIGUSR1), or the final ones after stop()."""
        if self._proc is None:
            if self._final_stats is None:
                raise TestbedError(f"linkem q{self.queue_num} in {self.netns} is not running")
            return dict(self._final_stats)
        before = self._read_stats_file()
        seen = before["snapshot"] if before else 0
        self._proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            current = self._read_stats_file()
            if current and current["snapshot"] > seen:
                return current
            time.sleep(0.01)
        raise TestbedError(f"linkem q{self.queue_num} in {self.netns}: no stats within {timeout_s} s")

    def _read_stats_file(self) -> dict | None:
        try:
            return json.loads(self.stats_path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def stop(self, timeout_s: float = 5.0) -> dict | None:
        """Remove the rules, then stop the process; returns the final counters (or None)."""
        errors: list[Exception] = []
        for rule in reversed(self._rules_added):
            delete = [("-D" if a == "-A" else a) for a in rule]
            try:
                _run(delete)
            except ToolError as e:
                errors.append(e)
        self._rules_added.clear()
        if self._proc is not None:
            proc, self._proc = self._proc, None
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                    errors.append(TestbedError(f"linkem pid {proc.pid} ignored SIGTERM; killed"))
            final = self._read_stats_file()
            if final and final.get("reason") == "exit":
                self._final_stats = final
        if self._owns_log_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir, self._owns_log_dir = None, False
        if errors:
            raise errors[0]
        return self._final_stats

    def __enter__(self) -> "LinkemElement":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _run(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise ToolError(argv, None) from None
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    return proc.stdout
