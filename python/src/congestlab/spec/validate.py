"""Cross-references of a study spec: every node, server, workload, axis and level it names
exists and fits. Raises ValueError with one line naming the field (loader.py turns it into
a SpecError, exit 2) before anything is built."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from congestlab.results import COMMON_COLUMNS, DESIGN_COLUMNS
from congestlab.spec.addresses import check_subnets, host_ids
from congestlab.spec.axis_columns import check_axis_names

if TYPE_CHECKING:
    from congestlab.spec.models import StudySpec


def non_finite_problem(data: Any) -> str | None:
    """The first nan or inf anywhere in a spec as read (TOML has both), named by its field
    path (list items by their name or switch, as in `[set]`); None when every number is finite.
    Typed fields refuse them too (the models' allow_inf_nan), but free tables (sysctls,
    knobs, `[set]`, levels, axis values, report) hold values of any type."""
    found = _non_finite(data)
    if found is None:
        return None
    value, keys_inner_first = found
    return f"{'.'.join(reversed(keys_inner_first)) or 'value'}: {value} is not a finite number"


def _non_finite(data: Any) -> tuple[float, list[str]] | None:
    """The first non-finite number and its path's keys, innermost first; the path is only
    built for the one found (a sweep validates every point's spec: its walk must be cheap)."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (data, [])
    if isinstance(data, dict):
        for key, value in data.items():
            if (found := _non_finite(value)) is not None:
                found[1].append(str(key))
                return found
    elif isinstance(data, list):
        for index, value in enumerate(data):
            if (found := _non_finite(value)) is not None:
                found[1].append(_item_name(value, index))
                return found
    return None


def _item_name(item: Any, index: int) -> str:
    if isinstance(item, dict):
        for key in ("name", "switch"):
            if isinstance(item.get(key), str):
                return item[key]
    return str(index)


def check_references(study: "StudySpec", check_axis_columns: bool = True) -> None:
    check_subnets(study.topology)
    host_ids(study.topology)
    nodes = {n.name: n for n in study.topology.nodes}

    def host(name: str, what: str) -> None:
        if name not in nodes:
            raise ValueError(f"{what} names unknown node {name!r}")
        if nodes[name].kind != "host":
            raise ValueError(f"{what} {name!r} must be a host, not a router")

    servers = {}
    for server in study.servers:
        host(server.node, f"servers.{server.name}.node")
        if server.name in servers:
            raise ValueError(f"server name {server.name!r} is used twice")
        servers[server.name] = server
        wants_user = server.kind == "lean"
        if (nodes[server.node].stack == "user") != wants_user:
            raise ValueError(f"servers.{server.name}: a {server.kind} server needs node {server.node!r} with "
                             f"stack = \"{'user' if wants_user else 'kernel'}\"")
    _check_listeners(study)
    kernel_servers_per_node: dict[str, list[str]] = {}
    for server in study.servers:
        if server.kind != "lean" and not server.udp_only:  # QUIC's controller is the server's own
            kernel_servers_per_node.setdefault(server.node, []).append(server.name)
    for node, names in kernel_servers_per_node.items():
        if len({study.server(n).cc for n in names}) > 1:
            raise ValueError(f"servers {', '.join(names)} share node {node!r} but ask for different cc "
                             "(a node's routes carry one congestion control)")

    def server(name: str, what: str, file_kib: int | None = None):
        if name not in servers:
            raise ValueError(f"{what} names unknown server {name!r}; known: {', '.join(servers) or 'none'}")
        if file_kib is not None and file_kib not in servers[name].files_kib:
            raise ValueError(f"{what}: server {name!r} does not serve {file_kib} KiB "
                             f"(files_kib = {servers[name].files_kib})")
        return servers[name]

    names = [w.name for w in study.workloads]
    if len(set(names)) != len(names):
        raise ValueError("workload names must be unique")
    for w in study.workloads:
        for named in w.named():
            what = f"workloads.{w.name}.{named.field}"
            if named.server:
                server(named.name, what, named.file_kib)
            else:
                host(named.name, what)
        for end in w.crossings():
            node = servers[end.other].node if end.server else end.other
            if end.client == node:
                other = f"the node of server {end.other!r}" if end.server else "the node at its other end too"
                raise ValueError(f"workloads.{w.name}.{end.field}: {end.client!r} is {other}: its traffic would "
                                 "never cross the network; give it another host")
        w.check_study(study)

    levels = [lv.name for lv in study.levels]
    if len(set(levels)) != len(levels):
        raise ValueError("level names must be unique")
    experiments = [e.name for e in study.experiments]
    if len(set(experiments)) != len(experiments):
        raise ValueError("experiment names must be unique")
    for exp in study.experiments:
        where = f"experiments.{exp.name}"
        for name in exp.servers or []:
            server(name, f"{where}.servers")
        for name in exp.workloads or []:
            if name not in names:
                raise ValueError(f"{where}.workloads names unknown workload {name!r}; known: {', '.join(names)}")
        axis_names = [a.name for a in exp.axes]
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"{where}: axis names must be unique")
        for axis in exp.axes:
            if axis.name in (*COMMON_COLUMNS, *DESIGN_COLUMNS):
                raise ValueError(f"{where}.axes: {axis.name!r} is a reserved column name")
            for level in axis.levels:
                if level not in levels:
                    raise ValueError(f"{where}.axes.{axis.name}: unknown level {level!r}; known: "
                                     f"{', '.join(levels) or 'none'}")
    if check_axis_columns:
        check_axis_names(study)
    quick = study.quick
    for name in quick.experiments or []:
        if name not in experiments:
            raise ValueError(f"quick.experiments names unknown experiment {name!r}")
    all_axes = {a.name: a for e in study.experiments for a in e.axes}
    for axis, labels in quick.axes.items():
        if axis not in all_axes:
            raise ValueError(f"quick.axes names unknown axis {axis!r}; known: {', '.join(all_axes) or 'none'}")
        known = all_axes[axis].point_labels()
        for label in labels:
            if label not in known:
                raise ValueError(f"quick.axes.{axis}: unknown value {label!r}; known: {', '.join(known)}")
    for exp_name, own in quick.per_experiment.items():
        if exp_name not in experiments:
            raise ValueError(f"quick.per_experiment names unknown experiment {exp_name!r}")
        exp_axes = {a.name: a for a in study.experiment(exp_name).axes}
        for axis, labels in own.axes.items():
            if axis not in exp_axes:
                raise ValueError(f"quick.per_experiment.{exp_name}.axes names unknown axis {axis!r}; known: "
                                 f"{', '.join(exp_axes) or 'none'}")
            known = exp_axes[axis].point_labels()
            for label in labels:
                if label not in known:
                    raise ValueError(f"quick.per_experiment.{exp_name}.axes.{axis}: unknown value {label!r}; "
                                     f"known: {', '.join(known)}")
    if study.calibrate:
        for name in study.calibrate:
            host(name, "calibrate")


def _check_listeners(study: "StudySpec") -> None:
    """Two servers cannot listen on one node and port (the second's bind fails, or both
    "start" and one answers for the other); a user-stack node's addresses and TAP device
    (testbed/plan.py USER_STACK_TAP) belong to one lean server, whatever its port."""
    listening: dict[tuple[str, int], str] = {}
    lean_on: dict[str, str] = {}
    for server in study.servers:
        if server.kind == "lean":
            if server.node in lean_on:
                raise ValueError(f"servers.{server.name}.node: node {server.node!r} already has lean server "
                                 f"{lean_on[server.node]!r} (a user-stack node's addresses belong to one lean "
                                 "server); give it a node of its own with stack = \"user\"")
            lean_on[server.node] = server.name
        key = (server.node, server.port)
        if key in listening:
            raise ValueError(f"servers.{server.name}.port: {server.port} on node {server.node!r} is already "
                             f"servers.{listening[key]}'s port; two servers cannot listen on one node and port")
        listening[key] = server.name
