"""docs/spec.md, generated from the spec models so the reference never drifts from the code:
`congestlab schema --markdown > docs/spec.md` (a unit test checks the file is current)."""

from __future__ import annotations

import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from congestlab.spec import get_workload, models, report, servers, workloads

INTRO = """# Writing a study spec

A study is one TOML file: the network (`[topology]`), the servers, the workloads (the
traffic), named `[[levels]]`, and `[[experiments]]` whose sweep axes make the points. Every
preset (`congestlab presets`) is such a file; `congestlab run FILE` runs yours,
`--dry-run` prints the testbed's commands and every point without touching anything, and
`congestlab schema` prints the JSON Schema for editors that validate TOML as you type.
A wrong field or value is one line naming it (exit code 2) before anything is built. So is a
spec that cannot run as written: two servers on one node and port (or two lean servers on one
user-stack node), switches whose subnets overlap, a `host_id` taken twice on a switch or not
fitting its subnet, a `nan` or `inf` anywhere. A link whose `rate_bps` is at or above
`topology.unshaped_at_or_above_bps` is left at veth speed without a shaper, so its
`queue_packets` and `tbf_rate_bps` are not applied: `--dry-run` prints a warning and a run
records it as a failed fidelity check in its manifest.

This page is generated from the models in `python/src/congestlab/spec/` by
`congestlab schema --markdown`; units are in the field names.

## A worked example: a two-axis sweep

`examples/lean-weights.toml` starts from the `ipv6` preset (`extends`: every top-level key
the file gives replaces the preset's) and sweeps the lean server's RTO weights against two
congestion levels:

```toml
{example}
```

It has 2 x 2 = 4 points, each run 3 times; `results/request.csv` has a `weight` and a
`level` column. `congestlab run examples/lean-weights.toml --dry-run` lists the points:
`weights.weight-W1.level-C0`, `weights.weight-W1.level-C1B`, ...

## Your own server

Any program that serves files over HTTP is a server under test in a few lines
(`kind = "command"`; docs/servers.md has every field, the placeholders and what the runner
does with it). `examples/own-server.toml` puts Python's http.server beside Apache:

```toml
[[servers]]
name = "mine"
kind = "command"
node = "server"
port = 8080
command = ["python3", "-m", "http.server", "--bind", "::", "--protocol", "HTTP/1.1", "{{port}}", "--directory", "{{docroot}}"]
version = ["python3", "--version"]
```

A GET names it like any server (`server = "mine"`); over TLS and HTTP/2 the server says
`tls = true` and `http = ["1.1", "2"]` and the request `tls = true`, `http = "2"`. HTTP/3
(QUIC) comes from Caddy (`http = ["1.1", "2", "3"]`) or ngtcp2's server (`kind = "ngtcp2"`,
`http = ["3"]`, its controller in `quic_cc`), with `client_kind = "curl-cffi"` on the GET
workload and `http = "3"` on the request (docs/http3.md).

## Points, field paths and order

- **Axes** of an experiment combine as a Cartesian product. An axis sets one or more
  *field paths* per value; with several fields each value is a list, one entry per field,
  and they move together (paired), e.g.
  `{{ name = "cc", fields = ["servers.srv.cc", "servers.bt.cc"], values = [["cubic", "cubic"], ["compound", "compound"]] }}`.
  An axis may instead name `levels`: each `[[levels]]` entry is a named set of field values.
  An axis's `name` is its column in the results, so it may not be a column the records fill
  with their own measurement or outcome (`delay_ms`, `outcome`, `client_port`, ...), nor a
  common or run-design column; a column that echoes a setting the record ran with (`server`,
  `family`, `file_kib`, ...) only when the axis sets that field (docs/data-format.md,
  "results/<kind>.csv").
- **Field paths** are dotted: `servers.lean.knobs.weight`, `nodes.r1.links.s0.rate_bps`
  (links are named by their switch), `nodes.client.sysctls.net.ipv4.tcp_rmem` (the rest of
  the path is the key of a mapping: knobs, sysctls, mix), `workloads.get.requests.0.file_kib`
  (list items without a name by index), `warmup_s`. A path must name a field that exists.
- **Point ids** are `experiment.axis-label.axis-label`; they stay the same from run to run and
  name the directory `points/<id>/r<repetition>/` of each repetition.
- **Order** (`order = "interleaved"`, the default): a design that compares within time, so a
  slow drift of the shared machine does not line up with what a claim compares.
  - *Units*: points whose servers and long-lived background (`lifetime = "block"`) are the
    same form a unit; the background keeps running across it. Points of one experiment
    that share the background and whose servers can all run at once (one setting per
    server, each on its own node and port, e.g. the ipv6 preset's Apache, lean and
    leanmodern) form one unit with all of those servers running: compared servers are
    measured side by side, not all of one then all of the other. Levels whose settings
    change in place (a link rate, a sysctl: no new background) are points of one unit too.
  - *Within a unit*: the repetitions go round-robin over its points, shuffled per round
    with `seed`, and spread so the same point, or the same measured server, never runs
    twice in a row where the round has a choice (the ipv6 preset: longest streak 1).
  - *Blocks* (`passes = 2`, the default): where the background or a server's settings
    change (a new warm-up), the units of an experiment run in two passes of half their
    rounds each, the second in the reverse order of the first (mirrored blocks: A B … B A,
    so a linear drift weighs on every unit alike). Units of one level run next to each
    other, so chapter 3's Apache and "IIS" (one server, another congestion control) run
    ABBA within each level, each block with its warm-up.
  - *One pass* (`passes = 1`): each unit runs all its rounds in one visit, in the first
    pass's order (A B …): one warm-up and one server start per unit instead of two, but no
    mirror (a drift of the machine lines up with the order of the units) and no drift
    check. The rule is a setting, not a consequence of the repetitions, because the two
    passes still balance the units against a linear drift at one round per pass (A B B A);
    what one round per pass loses is the drift check, whose ends then hold one round's GETs
    (it needs 2 per end). The shipped presets set `passes = 1` in their `[quick]` (fewer
    than 2 rounds in a pass: a quick look, whose verdicts at n = 2 or 3 are mostly
    inconclusive anyway) and keep 2 for their full runs. `passes` may be set for the study,
    for one experiment (its `set`) or in `[quick]`'s `set`; not on an axis. `--dry-run`
    prints each experiment's passes and its rounds per pass.
  - *Drift check* (two passes): the experiment's first declared point's unit opens the first
    pass and closes the second; its GET delays at the two ends are compared (stats engine,
    Holm, α = 0.01) and a difference is flagged in the manifest's fidelity checks
    (`drift_<point>_<family>`) and its `analysis.drift`. A reference cell that cannot be
    compared is listed there with why (one pass, a single round, a second pass that did
    not run, fewer than 2 GETs at an end), and the report says so in one line.
  - *GETs*: each GET starts only after the previous GET's connection has closed at its
    server (kernel server: its socket; lean server: its log's `close` event; at most 10 s),
    recorded per GET (`previous_closed`, `previous_wait_ms`) and checked per repetition
    (`get_previous_closed`, shown as one row per run: the longest wait, and the repetitions
    where a GET started early). A request's families go in an order drawn per repetition
    from `seed` (`family_order`, `family_position`) and form one `family_pair`; every
    result row carries `round` (the points of a unit measured side by side), `block` (1 or
    2: which pass) and `run_index`.
  - `order = "sequential"` keeps the seeds' own order: one server at a time, each point's
    repetitions back to back, units in declared order, families in declared order.
  `--dry-run` prints the order (with its longest streaks of one point and one server); the
  manifest records it (`run_order`, `run_order_streaks`, `run_passes`).
- **Servers** run while a point's workloads name them (plus an experiment's `servers`), and
  are restarted when a point changes their settings. Between points the testbed is
  reconfigured in place: link rates, queues, token buckets, delay/jitter/loss, sysctls and
  congestion controls; a point may not change the network's structure.
- **`[quick]`** declares what `--quick` runs: which experiments, which labels of which axes,
  how many repetitions, and field values to change (e.g. shorter durations).
- **Variants**: `extends = "PRESET"` plus a `[set]` table of field paths makes a preset's
  variant (e.g. the `*-seed-fit` presets). `[set]` is applied after the file's own top-level
  keys, and its values hold under `--quick` too: the `[quick]` settings the file inherits no
  longer touch those fields (a `[quick]` the file writes itself stands as written). A file
  may extend a preset that is itself a variant; the variant's `[set]` is applied first. A
  table the file gives replaces the preset's whole: a `[topology]` with a few keys lacks the
  rest (the error says so); change a few fields with `[set]`, e.g.
  `"topology.unshaped_at_or_above_bps" = 2e9`.
- **GET timeouts from the published delays**: a `get` workload with
  `timeout = "from-published"` waits at each point
  `min(timeout_s, max(timeout_min_s, timeout_margin × D))`, where D is the longest delay the
  study publishes at the point's level (its label on the axis of `[[levels]]`; the published
  rows with that `level`, any experiment, the metrics in `timeout_published`, in ms or s by
  their suffix). A point with no level axis, or a level with no published delay, keeps
  `timeout_s`, which is also the most it waits (so a `[quick]` timeout still caps it).
  `timeout_margin` (≥ 1) and `timeout_reason` are required: a published delay is a mean, and
  the margin has to cover single GETs around it. The chosen value is an ordinary setting of
  the point (`workloads.get.timeout_s`): `--dry-run` prints it with where it came from, and
  the manifest records it per point (`points[].timeouts`: timeout, basis, level, the
  published delay and its row, margin, floor, the declared timeout, the reason). A GET that
  times out is a censored sample (docs/statistics.md); what a shorter timeout costs each
  claim of chapter 4 is in docs/rto-study.md ("The GET's timeout").

## Reference
"""


def _type_name(annotation) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is type(None):
        return "none"
    if origin is typing.Literal:
        return " \\| ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"table of {_type_name(args[1])}" if args else "table"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation)).replace("Any", "any")


def _default(field) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        return f"`{value!r}`" if not isinstance(value, BaseModel) else "(defaults)"
    if field.default is PydanticUndefined:
        return ""
    return f"`{field.default!r}`" if field.default is not None else "none"


# meanings of fields whose models leave them implicit (the same name means the same thing)
COMMON_MEANINGS = {
    "name": "identifier, referred to by other parts of the spec",
    "title": "human-readable title (reports)",
    "source": "the seed and its tables/figures this reproduces",
    "topology": "the emulated network",
    "servers": "servers that workloads may address",
    "workloads": "the traffic: background and measuring workloads",
    "levels": "named sets of field values, e.g. congestion levels, for axes with `levels`",
    "experiments": "blocks of points; default: one block `main` without axes",
    "repetitions": "repetitions of every point",
    "quick": "what `--quick` runs",
    "switches": "Ethernet segments (Linux bridges)",
    "nodes": "hosts and routers, each a network namespace",
    "unshaped_at_or_above_bps": ("links at or above this rate stay at veth speed (a shaper that fast "
                                 "does not fit 2 cores); at most 1e12"),
    "link_emulator": "who realises delay/jitter/loss: netem if the kernel has it (auto), else congestlab's linkem",
    "kind": "what this is (see the allowed values)",
    "links": "attachments to switches (hosts: exactly one)",
    "tcp_timestamps": "net.ipv4.tcp_timestamps of the node",
    "port": "TCP port the server listens on",
    "ready": "when a started server counts as ready (its check and how long to wait)",
    "stop": "how the server is stopped (a signal, then its cgroup's tasks killed)",
    "pairs": "(family, source, sink) hosts per address family",
    "flows": "number of flows (MGEN) / one entry per flow (iperf3)",
    "tcp_payload_v4_bytes": "MGEN message size of TCP flows over IPv4",
    "tcp_payload_v6_bytes": "MGEN message size of TCP flows over IPv6",
    "udp_payload_v4_bytes": "MGEN message size of UDP flows over IPv4",
    "udp_payload_v6_bytes": "MGEN message size of UDP flows over IPv6",
    "base_port": "first port of the flows",
    "family": "address family, v4 or v6",
    "lifetime": "block: kept running while its settings stay the same; point: restarted per point",
    "file_kib": "file size in KiB (the server must serve it)",
    "requests": "the requests (get) / total requests (anma)",
    "timeout_s": "give up after this long",
    "version": "iperf 2 or iperf3",
    "duration_s": "how long it runs, seconds",
    "tcp_sessions": "parallel TCP sessions",
    "udp_sessions": "UDP sessions beside them",
    "udp_rate_bps": "rate of each UDP session",
    "server_window_bytes": "iperf -w on the receiving side",
    "client_window_bytes": "iperf -w on the sending side",
    "server_length_bytes": "iperf -l (read length) on the receiving side",
    "client_length_bytes": "iperf -l (write length) on the sending side",
    "protocol": "tcp or udp",
    "client": "host the client runs on",
    "server": "server (get, http_load, anma) or host (iperf, ping) at the other end",
    "concurrency": "concurrent connections",
    "count": "echo requests sent",
    "interval_s": "between echo requests",
}

MODELS: list[type[BaseModel]] = [
    models.StudySpec, models.TopologySpec, models.SwitchSpec, models.NodeSpec, models.LinkSpec, servers.ServerSpec,
    servers.ReadySpec, servers.StopSpec, models.CaptureSpec, models.LevelSpec, models.ExperimentSpec, models.AxisSpec,
    models.QuickSpec,
    workloads.MgenWorkload, workloads.MgenPair, workloads.HttpLoadWorkload, get_workload.GetWorkload,
    get_workload.GetRequest, workloads.IperfWorkload, workloads.IperfFlow, workloads.AnmaWorkload,
    workloads.PingWorkload, report.ClaimSpec,
]


def render(example_path: Path) -> str:
    hints = {}
    out = [INTRO.replace("{example}", example_path.read_text().strip()).replace("{{", "{").replace("}}", "}")]
    for model in MODELS:
        hints = typing.get_type_hints(model, include_extras=True)
        out.append(f"### {model.__name__}\n")
        doc = (model.__doc__ or "").strip()
        if doc and not doc.startswith(("Usage docs", "!!!")):
            out.append(" ".join(doc.split()) + "\n")
        out.append("| field | type | default | meaning |")
        out.append("|---|---|---|---|")
        for name, field in model.model_fields.items():
            kind = _type_name(hints.get(name, field.annotation))
            if name == "workloads" and model is models.StudySpec:
                kind = "list of workload tables, each with `kind` = mgen, http_load, get, iperf, anma or ping"
            meaning = (field.description or COMMON_MEANINGS.get(name, "")).replace("|", "\\|")
            out.append(f"| `{name}` | {kind} | {_default(field)} | {meaning} |")
        out.append("")
    return "\n".join(out)
