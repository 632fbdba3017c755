"""The lean ("bare PC") server: leanweb on a TAP device inside a server namespace.

`LeanServer.start()` creates the TAP device in the namespace, attaches it to the given
bridge, starts `leanweb` there and waits for its one ready line; `stop()` sends SIGTERM
to that PID (SIGKILL after a grace period) and deletes the TAP device. The kernel of the
namespace never sees the server's IP traffic: leanweb has its own TCP/IP stack.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

from congestlab.errors import SpecError, ToolError
from congestlab.paths import rust_binary

READY_PREFIX = "leanweb ready "
READY_TIMEOUT_S = 10.0
STOP_GRACE_S = 5.0

# knob name (spec / TOML) -> leanweb flag
KNOB_FLAGS = {
    "rto_alpha": "--rto-alpha",
    "rto_beta": "--rto-beta",
    "rto_k": "--rto-k",
    "rto_g_us": "--rto-g-us",
    "rto_min_ms": "--rto-min-ms",
    "rto_max_ms": "--rto-max-ms",
    "rto_initial_ms": "--rto-initial-ms",
    "sampling": "--sampling",
    "weight": "--weight",
    "port": "--port",
    "profile": "--profile",  # bare | modern (docs/leanweb.md)
    "cc": "--cc",  # none | reno | cubic | compound
    "recovery": "--recovery",  # go-back-n | newreno (RFC 6582) | sack (RFC 6675)
    "sack": "--sack",  # RFC 2018, bool
    "timestamps": "--timestamps",  # RFC 7323, bool
    "rack_tlp": "--rack-tlp",  # RFC 8985, bool
    "limited_transmit": "--limited-transmit",  # RFC 3042, bool
    "initial_window_segments": "--initial-window-segments",  # RFC 6928
    "send_window_segments": "--send-window-segments",  # the sender's own cap (docs/leanweb.md)
    "pacing_mbps": "--pacing-mbps",  # the sender's own pacing (docs/leanweb.md)
    "hystart": "--hystart",  # RFC 9406 HyStart++, bool
    "abc_limit_segments": "--abc-limit-segments",  # RFC 3465's L; 0 = none (Linux)
    "push": "--push",  # every-segment | end-of-data: which data segments carry PSH
    "ipv4_id": "--ipv4-id",  # zero | per-connection
    "gso": "--gso",  # GSO super-frames through the TAP device, bool (docs/leanweb.md)
    "mtu": "--mtu",
    "mac": "--mac",
    "send_buffer_bytes": "--send-buffer-bytes",
    "send_buffer_max_bytes": "--send-buffer-max-bytes",  # autotuning ceiling, 0 = fixed buffer
    "recv_buffer_bytes": "--recv-buffer-bytes",
    "window_scale": "--window-scale",
    "time_wait_ms": "--time-wait-ms",
    "max_connections": "--max-connections",
    "max_half_open": "--max-half-open",
    "header_timeout_ms": "--header-timeout-ms",
    "idle_timeout_ms": "--idle-timeout-ms",
    "syn_cookies": "--syn-cookies",  # auto | always | never (RFC 4987 §3.6)
}


# a profile's congestion control when the knobs name none (crates/leantcp/src/conn.rs:
# TcpConfig::bare() and modern())
PROFILE_CC = {"bare": "none", "modern": "cubic"}


def requested_cc(knobs: dict) -> str:
    """The congestion control a lean server's knobs ask for: `cc`, else its profile's."""
    return str(knobs.get("cc") or PROFILE_CC.get(str(knobs.get("profile", "bare")), "none"))


# leanweb's switches (clap's BoolishValueParser) take these words as well as TOML booleans
_SWITCH_WORDS = ("on", "off", "true", "false", "yes", "no", "y", "n", "t", "f", "1", "0")


def _words(*allowed: str, any_case: bool = False):
    folded = {word.lower() for word in allowed}

    def check(value: object) -> str | None:
        if isinstance(value, str) and (value.lower() in folded if any_case else value in allowed):
            return None
        return f"expected {', '.join(allowed)}"
    return check


def _integer(low: int, high: int | None = None):
    def check(value: object) -> str | None:
        # a TOML true is an int to Python, never a count to leanweb
        if isinstance(value, int) and not isinstance(value, bool) and low <= value and (high is None or value <= high):
            return None
        return f"expected an integer {low}..{high}" if high is not None else f"expected an integer >= {low}"
    return check


def _number(low: float, high: float, low_open: bool = False):
    def check(value: object) -> str | None:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            if (low < value if low_open else low <= value) and value <= high:
                return None
        return f"expected a number in {'(' if low_open else '['}{low:g}, {high:g}]"
    return check


def _switch(value: object) -> str | None:
    if isinstance(value, bool) or (isinstance(value, str) and value.lower() in _SWITCH_WORDS):
        return None
    return "expected true or false (on/off)"


def _mac(value: object) -> str | None:
    parts = value.split(":") if isinstance(value, str) else []
    if len(parts) == 6 and all(len(p) == 2 and all(c in "0123456789abcdefABCDEF" for c in p) for p in parts):
        return None if int(parts[0], 16) & 1 == 0 else "expected a unicast MAC address"
    return "expected six hex bytes, e.g. 02:00:00:00:00:01"


# knob name -> the values leanweb accepts (crates/leanweb/src/config.rs, crates/leantcp/src/rto.rs
# and conn.rs validate()): checked when a spec loads, so a sweep fails before it runs
KNOB_VALUES = {
    "rto_alpha": _number(0, 1, low_open=True),
    "rto_beta": _number(0, 1, low_open=True),
    "rto_k": _number(0, math.inf),
    "rto_g_us": _integer(0),
    "rto_min_ms": _integer(0),
    "rto_max_ms": _integer(0),
    "rto_initial_ms": _integer(1),
    "sampling": _words("all", "one", "some", any_case=True),
    "weight": _words(*(f"W{i}" for i in range(1, 10)), any_case=True),
    "port": _integer(1, 65535),
    "profile": _words("bare", "modern"),
    "cc": _words("none", "reno", "newreno", "cubic", "compound", "ctcp"),
    "recovery": _words("go-back-n", "gbn", "newreno", "sack"),
    "sack": _switch,
    "timestamps": _switch,
    "rack_tlp": _switch,
    "limited_transmit": _switch,
    "initial_window_segments": _integer(1),
    "send_window_segments": _integer(1),
    "pacing_mbps": _number(0.001, 100_000),
    "hystart": _switch,
    "abc_limit_segments": _integer(0),
    "push": _words("every-segment", "end-of-data"),
    "ipv4_id": _words("zero", "per-connection"),
    "gso": _switch,
    "mtu": _integer(1280, 9000),
    "mac": _mac,
    "send_buffer_bytes": _integer(0),
    "send_buffer_max_bytes": _integer(0),
    "recv_buffer_bytes": _integer(0),
    "window_scale": _integer(0, 14),
    "time_wait_ms": _integer(0),
    "max_connections": _integer(0),
    "max_half_open": _integer(0),
    "header_timeout_ms": _integer(0),
    "idle_timeout_ms": _integer(0),
    "syn_cookies": _words("auto", "always", "never"),
}


def knob_value_problem(knobs: dict) -> str | None:
    """The first knob value leanweb would refuse, as one line; None when all are fine."""
    for name, value in knobs.items():
        problem = KNOB_VALUES[name](value) if name in KNOB_VALUES else None
        if problem:
            return f"lean knob {name} = {value!r}: {problem}"
    if "weight" in knobs and ({"rto_alpha", "rto_beta"} & set(knobs)):
        return "lean knob weight conflicts with rto_alpha/rto_beta: give one or the other"
    if knobs.get("rto_min_ms", 0) > knobs.get("rto_max_ms", math.inf):
        return f"lean knobs rto_min_ms = {knobs['rto_min_ms']} is above rto_max_ms = {knobs['rto_max_ms']}"
    return None


def knob_args(knobs: dict) -> list[str]:
    """The leanweb flags of a server's knobs (also the simulated server's: simulate/mapping.py)."""
    argv: list[str] = []
    for name, value in knobs.items():
        # TOML booleans become on/off (leanweb's switches take on|off|true|false)
        argv += [KNOB_FLAGS[name], ("on" if value else "off") if isinstance(value, bool) else str(value)]
    return argv


def _run(argv: list[str]) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise ToolError(argv, proc.returncode, proc.stderr)
    return proc.stdout


class LeanServer:
    """One leanweb process on a TAP device bridged onto the server LAN of `netns`."""

    def __init__(
        self,
        netns: str,
        tap: str,
        bridge: str,
        addr4_cidr: str,
        addr6_cidr: str,
        gateway4: str | None,
        gateway6: str | None,
        root_dir: Path,
        log_path: Path,
        knobs: dict[str, str | float | int | bool] | None = None,
    ):
        if not 0 < len(tap) <= 15:
            raise SpecError("lean.tap", f"interface name {tap!r} must be 1..15 characters")
        for name in (knobs or {}):
            if name not in KNOB_FLAGS:
                raise SpecError(f"lean.knobs.{name}", f"unknown knob; known: {', '.join(sorted(KNOB_FLAGS))}")
        self.netns = netns
        self.tap = tap
        self.bridge = bridge
        self.addr4_cidr = addr4_cidr
        self.addr6_cidr = addr6_cidr
        self.gateway4 = gateway4
        self.gateway6 = gateway6
        self.root_dir = Path(root_dir)
        self.log_path = Path(log_path)
        self.knobs = dict(knobs or {})
        self.ready_line: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._tap_created = False
        self._binary: Path | None = None

    @property
    def binary(self) -> Path:
        if self._binary is None:
            self._binary = rust_binary("leanweb")
        return self._binary

    @property
    def argv(self) -> list[str]:
        """The leanweb command line (without the `ip netns exec` prefix)."""
        argv = [str(self.binary), "--tap", self.tap, "--addr4", self.addr4_cidr, "--addr6", self.addr6_cidr,
                "--root", str(self.root_dir), "--log", str(self.log_path)]
        if self.gateway4:
            argv += ["--gateway4", self.gateway4]
        if self.gateway6:
            argv += ["--gateway6", self.gateway6]
        return argv + knob_args(self.knobs)

    @property
    def pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None and self._proc.poll() is None else []

    def version(self) -> str:
        return _run([str(self.binary), "--version"]).strip()

    def start(self) -> None:
        ns = ["ip", "-n", self.netns]
        _run(ns + ["tuntap", "add", "dev", self.tap, "mode", "tap"])
        self._tap_created = True
        try:
            _run(ns + ["link", "set", self.tap, "master", self.bridge])
            _run(ns + ["link", "set", self.tap, "up"])
            argv = ["ip", "netns", "exec", self.netns] + self.argv
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            # stdout and stderr go to a file, never a pipe nobody drains once it is ready
            with self.console_path.open("w") as console:
                self._proc = subprocess.Popen(argv, stdout=console, stderr=subprocess.STDOUT, text=True)
            self.ready_line = self._wait_ready(argv)
        except BaseException:
            self.stop()
            raise

    def wait_started(self) -> None:
        """Nothing left to wait for: start() returns once leanweb printed its ready line."""

    @property
    def console_path(self) -> Path:
        """leanweb's stdout and stderr (the ready line, warnings, errors)."""
        return self.log_path.with_suffix(".console.log")

    def _wait_ready(self, argv: list[str]) -> str:
        assert self._proc is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            exited = self._proc.poll() is not None
            for line in self.console_path.read_text(errors="replace").splitlines():
                if line.startswith(READY_PREFIX):
                    return line.strip()
            if exited:
                break
            time.sleep(0.05)
        rc = self._proc.poll()
        output = self.console_path.read_text(errors="replace").strip()
        raise ToolError(argv, rc if rc is not None else -1, output or "no ready line in time")

    def effective_settings(self) -> dict:
        """The `start` event leanweb logs: the cc, recovery and RTO settings it really runs with."""
        try:
            with self.log_path.open() as log:
                event = json.loads(log.readline())
        except (OSError, ValueError) as err:
            raise ToolError(self.argv, None, f"no start event in {self.log_path}: {err}") from None
        if event.get("event") != "start":
            raise ToolError(self.argv, None, f"first event of {self.log_path} is not 'start'")
        return {k: v for k, v in event.items() if k not in ("event", "t_us", "unix_us")}

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        try:
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=STOP_GRACE_S)
        finally:
            if self._tap_created:
                self._tap_created = False
                subprocess.run(["ip", "-n", self.netns, "link", "del", self.tap], capture_output=True, timeout=30)

    def __enter__(self) -> LeanServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
