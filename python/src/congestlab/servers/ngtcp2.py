"""ngtcp2's HTTP/3 server (Debian ngtcp2-server: `gtlsserver`, GnuTLS) serving the docroot
over QUIC only: its congestion controller runs in its own process (`--cc`), its qlog per
connection goes to the instance's log dir (one file per connection, named by the server's
Source Connection ID), its console is quiet (`-q`: the debug output names every packet).

No pid file and no TCP listener: it is started once its UDP socket is bound on the families
asked (servers/readiness.py); the runner's HTTP/3 GET follows. It stops on SIGINT (SIGTERM
ends it with 143). Trap: it answers `GET /<digits>` with that many zero bytes whatever the
docroot holds; the docroot's names (servers/files.py) are never all digits."""

from __future__ import annotations

import subprocess
import time

from congestlab.errors import ToolError
from congestlab.servers.process import ForegroundServer
from congestlab.servers.readiness import listening_families

BINARY = "gtlsserver"
FALLBACK = "/usr/sbin/gtlsserver"
PACKAGE = "ngtcp2-server"
DEFAULT_CC = "cubic"
DEFAULT_INITIAL_RTT_MS = 333.0  # gtlsserver's default (RFC 9002 §6.2.2's kInitialRtt)
# what the server does that a TCP server's kernel would decide, recorded per instance
# (docs/http3.md, "Confounds"): its own defaults, none of them set here
CONFOUNDS = {"stack": "ngtcp2 0.12 (user space)", "pacing": "always (ngtcp2 paces every controller)",
             "udp_gso": "up to 64 datagrams per sendmsg (the testbed's veths segment them: "
                        "tx-udp-segmentation off)",
             "max_udp_payload_bytes": "path MTU discovery from 1200 (veth MTU 1500: 1452 B)",
             "flow_control_window": "auto-tuned up to 6 MiB (connection and stream)",
             "ack_frequency": "RFC 9000 default: every 2nd ack-eliciting packet, max_ack_delay 25 ms",
             "initial_window": "ngtcp2 default: min(10 x max datagram, max(2 x max datagram, 14720 B))"}


def ngtcp2_version() -> str:
    """The package's version (gtlsserver has no version flag)."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", PACKAGE], capture_output=True, text=True,
                             timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


class Ngtcp2Server(ForegroundServer):
    """gtlsserver in a network namespace; `quic_cc` and `initial_rtt_ms` are its own flags."""

    kind = "ngtcp2"
    binary = BINARY
    fallback_path = FALLBACK

    def __init__(self, *args, quic_cc: str | None = None, initial_rtt_ms: float | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if self.tls is None:
            raise ValueError("an ngtcp2 server speaks QUIC: it needs the run's certificate")
        self.quic_cc = quic_cc or DEFAULT_CC
        self.initial_rtt_ms = initial_rtt_ms
        self.quiet = True  # -q: its debug output names every packet (runner/quic_cc_probe.py turns it on)

    @property
    def qlog_dir(self):
        return self.log_dir / "qlog"

    def render(self) -> str:
        return ""  # flags only

    def command(self, exe: str) -> list[str]:
        ports = sorted({p for _, p in self.listen})
        if len(ports) != 1:
            raise ValueError(f"an ngtcp2 server listens on one port, not {ports}")
        self.qlog_dir.mkdir(parents=True, exist_ok=True)
        rtt = [f"--initial-rtt={self.initial_rtt_ms:g}ms"] if self.initial_rtt_ms is not None else []
        # '*' binds 0.0.0.0 and [::] (v6 only): both families, inside the node's namespace
        return [exe, *(["-q"] if self.quiet else []), f"--htdocs={self.docroot}", f"--cc={self.quic_cc}", *rtt,
                f"--qlog-dir={self.qlog_dir}", "*", str(ports[0]), str(self.tls.key), str(self.tls.cert)]

    def wait_started(self, timeout_s: float = 10.0, families: tuple[str, ...] = ("v4", "v6")) -> None:
        """Its UDP socket is bound over every family asked (it writes no pid file)."""
        assert self.proc is not None
        port = str(self.listen[0][1])
        addr4 = next(a for a, _ in self.listen if ":" not in a)
        addr6 = next(a for a, _ in self.listen if ":" in a)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.exited() is not None:
                raise ToolError(self.argv, self.proc.returncode, f"it exited before it was ready: {self.log_tail()}")
            if set(families) <= listening_families(self.netns, port, "udp", addr4, addr6):
                return
            if time.monotonic() > deadline:
                raise ToolError(self.argv, -1, f"no UDP socket on port {port} after {timeout_s:g} s: "
                                f"{self.log_tail() or 'its log is empty'}")
            time.sleep(0.05)

    def stop(self, grace_s: float = 5.0, signal_name: str = "INT") -> None:
        super().stop(grace_s, signal_name)

    def version(self) -> str:
        return "ngtcp2/" + ngtcp2_version()

    def confounds(self) -> dict:
        """What this instance runs with beside the kernel TCP servers (the manifest records it)."""
        initial_rtt = self.initial_rtt_ms if self.initial_rtt_ms is not None else DEFAULT_INITIAL_RTT_MS
        return CONFOUNDS | {"quic_cc": self.quic_cc, "initial_rtt_ms": initial_rtt, "qlog": True}
