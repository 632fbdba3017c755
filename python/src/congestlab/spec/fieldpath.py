"""Dotted field paths into a study spec (as a dict), for sweep axes, levels and `set`.

    servers.lean.knobs.weight           a server's knob (list items are named by `name`)
    nodes.r1.links.s0.rate_bps          a link of a node (links are named by their switch)
    nodes.client.sysctls.net.ipv4.tcp_rmem   the rest of the path is the mapping's key
    workloads.get.requests.0.file_kib   list items without a name by index
    workloads.bg.mix.udp4, warmup_s

`nodes.` is short for `topology.nodes.`. A path must end on a field that exists (every
field is present in a dumped spec, defaults included), or on a key of a free mapping
(knobs, sysctls, mix), so a typo is reported by name.
"""

from __future__ import annotations

import copy
from typing import Any

FREE_MAPPINGS = ("knobs", "sysctls", "mix")
NAMED_BY = ("name", "switch")


class FieldPathError(ValueError):
    pass


def set_field(data: dict, path: str, value: Any, create: bool = False, owned: set[int] | None = None) -> None:
    """Set `path` in `data` (in place); `create` makes missing tables and keys (for a
    spec dumped without its defaults, once the path was checked against a full one).
    `owned`: copy on write; every table or list on the path whose id is not in it is
    replaced by a shallow copy first (and its id added), so what `data` shares is untouched."""
    segments = path.split(".")
    if segments[0] == "nodes":
        segments = ["topology", *segments]
    node: Any = data
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if isinstance(node, list):
            index = _list_index(node, seg, path)
            if last:
                raise FieldPathError(f"{path}: ends on a list item; name one of its fields")
            node = _child(node, index, owned)
            continue
        if not isinstance(node, dict):
            raise FieldPathError(f"{path}: {'.'.join(segments[:i])} is a value, not a table")
        if create and seg not in node:
            node[seg] = {} if not last else value
        if seg in FREE_MAPPINGS and not last and isinstance(node.get(seg), dict):
            _child(node, seg, owned)[".".join(segments[i + 1:])] = value
            return
        if seg not in node:
            known = ", ".join(sorted(node)) if node else "none"
            raise FieldPathError(f"{path}: no field {seg!r} here; known: {known}")
        if last:
            node[seg] = value
        else:
            node = _child(node, seg, owned)


def _child(node: dict | list, key: Any, owned: set[int] | None) -> Any:
    """`node[key]`, replaced by a shallow copy first when writing copies on write."""
    child = node[key]
    if owned is not None and isinstance(child, (dict, list)) and id(child) not in owned:
        child = copy.copy(child)
        node[key] = child
        owned.add(id(child))
    return child


def get_field(data: dict, path: str) -> Any:
    """The value at `path` (None for an unset key of a free mapping)."""
    segments = path.split(".")
    if segments[0] == "nodes":
        segments = ["topology", *segments]
    node: Any = data
    for i, seg in enumerate(segments):
        if isinstance(node, list):
            node = node[_list_index(node, seg, path)]
        elif isinstance(node, dict):
            if seg in FREE_MAPPINGS and i < len(segments) - 1 and isinstance(node.get(seg), dict):
                return node[seg].get(".".join(segments[i + 1:]))
            if seg not in node:
                raise FieldPathError(f"{path}: no field {seg!r}")
            node = node[seg]
        else:
            raise FieldPathError(f"{path}: {'.'.join(segments[:i])} is a value, not a table")
    return node


def _list_index(items: list, seg: str, path: str) -> int:
    for index, item in enumerate(items):
        if isinstance(item, dict) and any(item.get(key) == seg for key in NAMED_BY):
            return index
    if seg.isdigit() and int(seg) < len(items):
        return int(seg)
    names = [str(item.get("name") or item.get("switch")) for item in items if isinstance(item, dict)]
    raise FieldPathError(f"{path}: no item {seg!r}; known: {', '.join(n for n in names if n != 'None') or 'none'}")


def apply(data: dict, settings: dict[str, Any], create: bool = False) -> dict:
    """A copy of `data` with every path of `settings` set. Only the tables and lists on
    the paths are copied (a spec's published numbers and report are most of it and are
    shared), so neither `data` nor anything it holds is changed; don't change the copy in place."""
    out = dict(data)
    owned = {id(out)}
    for path, value in settings.items():
        set_field(out, path, value, create, owned)
    return out


def field_path(loc: tuple, data: Any) -> str:
    """`servers[0].cc` style path; list items named by their `name` when they have one."""
    parts: list[str] = []
    node = data
    for key in loc:
        if isinstance(key, int):
            label = f"[{key}]"
            if isinstance(node, list) and key < len(node) and isinstance(node[key], dict):
                name = node[key].get("name")
                if name:
                    label = f"[{key}:{name}]"
            parts.append(label)
            node = node[key] if isinstance(node, list) and key < len(node) else None
        else:
            parts.append(("." if parts else "") + str(key))
            node = node.get(key) if isinstance(node, dict) else None
    return "".join(parts)
