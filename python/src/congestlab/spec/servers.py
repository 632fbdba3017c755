"""A server under test: a built-in kind (Apache, nginx, Caddy, lighttpd, h2o, ngtcp2's HTTP/3
server, the lean server) or any program (`kind = "command"`), what it serves (TLS, HTTP versions), how it is
known to be ready and how it is stopped (docs/servers.md)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator

from congestlab.spec.lean_knobs import KNOB_FLAGS, knob_value_problem
from congestlab.spec.server_template import TLS_PLACEHOLDERS, placeholders_in, unknown_placeholders
from congestlab.spec.validation_context import stored

CongestionControl = Literal["cubic", "reno", "bbr", "compound"]
# Debian's httpd, nginx, Caddy, lighttpd and h2o run on kernel TCP (Caddy serves HTTP/3 over
# QUIC too); "ngtcp2" is ngtcp2's HTTP/3 example server (gtlsserver: QUIC only, its congestion
# control in its own process); "lean" is the user-space leanweb server; "command" is any
# program the spec starts (servers/command.py)
ServerKind = Literal["apache", "nginx", "lean", "caddy", "lighttpd", "h2o", "ngtcp2", "command"]
HttpVersion = Literal["1.1", "2", "3"]
# ngtcp2's controllers (gtlsserver --cc)
QuicCongestionControl = Literal["cubic", "reno", "bbr", "bbr2"]
# the lean server's knobs are leanweb's flags (spec/lean_knobs.json); its port is ServerSpec.port
LEAN_KNOBS = tuple(k for k in KNOB_FLAGS if k != "port")
Scalar = str | int | float | bool

# what each built-in kind can serve: (over TLS, HTTP versions) -> allowed; plain HTTP/2 is
# h2c by prior knowledge (servers/<kind>.py renders each; docs/servers.md). A combination is
# listed only where the server answers no other version: none of them serves h2 without
# HTTP/1.1 over TLS, and h2o 2.2 always offers h2 by ALPN
BUILTIN_SERVES: dict[str, dict[bool, tuple[tuple[str, ...], ...]]] = {
    "apache": {False: (("1.1",), ("1.1", "2")), True: (("1.1",), ("1.1", "2"))},
    "lean": {False: (("1.1",),)},
    # nginx's plain `listen ... http2` is h2c only: HTTP/1.1 and h2c need two ports
    "nginx": {False: (("1.1",), ("2",)), True: (("1.1",), ("1.1", "2"))},
    # Caddy refuses h2 or h2c without h1; HTTP/3 on the same port number over UDP
    "caddy": {False: (("1.1",), ("1.1", "2")), True: (("1.1",), ("1.1", "2"), ("1.1", "2", "3"))},
    "lighttpd": {False: (("1.1",), ("1.1", "2")), True: (("1.1",), ("1.1", "2"))},
    "h2o": {False: (("1.1",), ("1.1", "2")), True: (("1.1", "2"),)},
    "ngtcp2": {True: (("3",),)},
}
# kinds without a TCP listener: no kernel congestion control of theirs is used
UDP_ONLY_KINDS = ("ngtcp2",)
SIGNALS = ("TERM", "INT", "QUIT", "HUP", "KILL", "WINCH")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ReadySpec(_Strict):
    """When a started server counts as ready (before anything is measured), checked from its
    host or a client over the families the point's requests use."""

    kind: Literal["http", "tcp_listen", "udp_bound", "log_regex"] = Field(
        default="http", description="http: a real GET of the smallest file answers 200 in full, over every TLS/HTTP "
        "version served; tcp_listen / udp_bound: a socket listens on the port (ss); log_regex: a line of `log` "
        "matches `regex`")
    timeout_s: float = Field(default=10.0, gt=0, le=300, description="give up (one line with the log's tail)")
    regex: str | None = Field(default=None, description="log_regex: a Python regular expression")
    log: str | None = Field(default=None, description="log_regex: the file to watch (placeholders allowed); "
                            "default: the server's stdout/stderr log")

    @model_validator(mode="after")
    def _regex(self) -> "ReadySpec":
        if self.kind == "log_regex":
            if not self.regex:
                raise ValueError("ready.kind = \"log_regex\" needs ready.regex")
            try:
                re.compile(self.regex)
            except re.error as err:
                raise ValueError(f"ready.regex {self.regex!r} is not a regular expression: {err}") from None
        elif self.regex is not None or self.log is not None:
            raise ValueError(f"ready.regex and ready.log are for kind \"log_regex\", not {self.kind!r}")
        return self


class StopSpec(_Strict):
    signal: Literal[SIGNALS] = Field(default="TERM", description="sent to the server's process first")
    grace_s: float = Field(default=5.0, gt=0, le=60, description="then every task of its cgroup is killed")


class ServerSpec(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,15}$")
    kind: ServerKind = "apache"
    node: str = Field(description="the host the server runs on")
    port: int = Field(default=80, ge=1, le=65535)
    cc: CongestionControl = Field(default="cubic", description="kernel congestion control (every kind but lean)")
    files_kib: list[int] = Field(default=[160, 320, 504], min_length=1, description="files served, KiB each")
    # a background's server (e.g. the rto preset's BT server at 125 Mbit/s: ~200 MB of pcap
    # per repetition) need not be captured when no table reads its port
    capture: bool = Field(default=True, description="capture this server's port in every repetition")
    # knobs passed to the lean server (rto_alpha, sampling, weight, ...)
    knobs: dict[str, Scalar] = Field(default_factory=dict, description="lean server flags (docs/leanweb.md)")
    tls: bool = Field(default=False, description="the port speaks TLS (a certificate of the run's own CA)")
    http: list[HttpVersion] = Field(default=["1.1"], min_length=1, description="HTTP versions served on the port "
                                    "(plain \"2\" is h2c by prior knowledge)")
    ready: ReadySpec = Field(default_factory=ReadySpec)
    stop: StopSpec = Field(default_factory=StopSpec)
    command: list[str] | None = Field(default=None, min_length=1, description="kind = \"command\": the argv, "
                                      "in the foreground (placeholders: docs/servers.md)")
    config_template: str | None = Field(default=None, description="kind = \"command\": a config file's text, "
                                        "written to {config} with placeholders replaced")
    config_name: str = Field(default="server.conf", pattern=r"^[A-Za-z0-9._-]{1,64}$",
                             description="kind = \"command\": the config file's name in {workdir}")
    version: str | list[str] | None = Field(default=None, description="kind = \"command\": a literal, or a "
                                            "command whose first output line is the version (recorded)")
    env: dict[str, str] = Field(default_factory=dict, description="kind = \"command\": extra environment")
    on_exit: Literal["stop", "restart"] = Field(default="stop", description="when its process exits during a "
                                                "repetition: end the run, or start it anew before the next one")
    quic_cc: QuicCongestionControl | None = Field(default=None, description="kind = \"ngtcp2\": its congestion "
                                                  "control (gtlsserver --cc; default cubic)")
    quic_initial_rtt_ms: float | None = Field(default=None, gt=0, le=10000, description="kind = \"ngtcp2\": the "
                                              "RTT assumed before the first sample (--initial-rtt; default ngtcp2's "
                                              "333 ms, RFC 9002 §6.2.2)")

    @property
    def udp_only(self) -> bool:
        """No TCP listener: HTTP/3 over QUIC only (its controller is the server's own)."""
        return self.kind in UDP_ONLY_KINDS

    @property
    def serves_quic(self) -> bool:
        return "3" in self.http

    @model_validator(mode="after")
    def _cc_of_kind(self, info: ValidationInfo) -> "ServerSpec":
        # the lean server's TCP is its own: a kernel algorithm would be recorded but never used
        if self.kind == "lean" and "cc" in self.model_fields_set and not stored(info):
            raise ValueError("a lean server has no kernel congestion control; set knobs.cc (\"none\") instead of cc")
        if self.kind != "lean" and self.knobs:
            raise ValueError(f"knobs are for the lean server, not for kind {self.kind!r}")
        if self.udp_only and "cc" in self.model_fields_set and not stored(info):
            raise ValueError(f"a {self.kind} server speaks QUIC over UDP: its congestion control is quic_cc, not cc")
        if self.kind != "ngtcp2" and not stored(info):
            given = [f for f in ("quic_cc", "quic_initial_rtt_ms") if getattr(self, f) is not None]
            if given:
                raise ValueError(f"{given[0]} is for kind \"ngtcp2\", not {self.kind!r}")
        unknown = sorted(set(self.knobs) - set(LEAN_KNOBS))
        if unknown:
            raise ValueError(f"unknown lean knob {unknown[0]!r}; known: {', '.join(LEAN_KNOBS)}")
        problem = knob_value_problem(self.knobs)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _what_it_runs(self) -> "ServerSpec":
        command_only = ("command", "config_template", "config_name", "version", "env")
        if self.kind == "command":
            if not self.command:
                raise ValueError("a server of kind \"command\" needs command (its argv)")
        else:  # (a stored spec spells every field, at its default)
            fields = type(self).model_fields
            given = [f for f in command_only if getattr(self, f) != fields[f].get_default(call_default_factory=True)]
            if given:
                raise ValueError(f"{given[0]} is for kind \"command\", not {self.kind!r}")
        if len(set(self.http)) != len(self.http):
            raise ValueError(f"http {self.http} names a version twice")
        if "3" in self.http and not self.tls:
            raise ValueError("http = \"3\" is QUIC, always over TLS 1.3: set tls = true")
        serves = BUILTIN_SERVES.get(self.kind)
        if serves is not None and tuple(sorted(self.http)) not in serves.get(self.tls, ()):
            options = "; ".join(f"tls = {str(t).lower()}: " + ", ".join(str(list(v)) for v in vs)
                                for t, vs in serves.items())
            raise ValueError(f"a {self.kind} server cannot serve http = {self.http} with tls = "
                             f"{str(self.tls).lower()} ({options})")
        texts = {"command": " ".join(self.command or []), "config_template": self.config_template or "",
                 "env": " ".join(self.env.values()), "ready.log": self.ready.log or "",
                 "version": " ".join([self.version] if isinstance(self.version, str) else self.version or [])}
        for where, text in texts.items():
            unknown = unknown_placeholders(text)
            if unknown:
                raise ValueError(f"{where}: unknown placeholder {{{unknown[0]}}} (known: docs/servers.md; "
                                 f"{{{{{unknown[0]}}}}} writes it literally)")
            tls_only = [p for p in placeholders_in(text) if p in TLS_PLACEHOLDERS]
            if tls_only and not self.tls:
                raise ValueError(f"{where}: placeholder {{{tls_only[0]}}} is the run's TLS material, for a server "
                                 "with tls = true")
        return self
