"""The lean server's knobs: the leanweb flag of each and the values leanweb accepts, read
from lean_knobs.json beside this file, which `leanweb --knobs-json` prints from its one
declaration (crates/leanweb/src/knobs.rs; `make lean-knobs-json` regenerates it and
python/tests/unit/test_lean_knobs_json.py checks the committed copy). A spec's knob values are checked when it loads, so a sweep
fails before it runs; the flags are also the simulated server's (simulate/mapping.py).

lean_knobs.json (format 1): `knobs` in flag order, each with a `kind`: number (min, max
when bounded, min_exclusive), integer (min, max when bounded), word (words, any_case),
switch (clap's BoolishValueParser words or a TOML boolean) or mac (a unicast MAC address);
`conflicts` (a knob that may not be given with others), `ordered` (low <= high when both
apply) and `profiles` (a profile's congestion control when the knobs name none:
crates/leantcp/src/config.rs TcpConfig::bare() and modern()).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from importlib import resources

_TABLE = json.loads(resources.files("congestlab.spec").joinpath("lean_knobs.json").read_text())

# knob name (spec / TOML) -> leanweb flag
KNOB_FLAGS: dict[str, str] = {knob["name"]: knob["flag"] for knob in _TABLE["knobs"]}
PROFILE_CC: dict[str, str] = {name: profile["cc"] for name, profile in _TABLE["profiles"].items()}

# leanweb's switches (clap's BoolishValueParser) take these words as well as TOML booleans
_SWITCH_WORDS = ("on", "off", "true", "false", "yes", "no", "y", "n", "t", "f", "1", "0")

Check = Callable[[object], "str | None"]


def _words(allowed: list[str], any_case: bool = False) -> Check:
    folded = {word.lower() for word in allowed}

    def check(value: object) -> str | None:
        if isinstance(value, str) and (value.lower() in folded if any_case else value in allowed):
            return None
        return f"expected {', '.join(allowed)}"
    return check


def _integer(low: int, high: int | None = None) -> Check:
    def check(value: object) -> str | None:
        # a TOML true is an int to Python, never a count to leanweb
        if isinstance(value, int) and not isinstance(value, bool) and low <= value and (high is None or value <= high):
            return None
        return f"expected an integer {low}..{high}" if high is not None else f"expected an integer >= {low}"
    return check


def _number(low: float, high: float, low_open: bool = False) -> Check:
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


def _check_of(knob: dict) -> Check:
    kind = knob["kind"]
    if kind == "number":
        return _number(knob["min"], knob.get("max", math.inf), knob.get("min_exclusive", False))
    if kind == "integer":
        return _integer(knob["min"], knob.get("max"))
    if kind == "word":
        return _words(knob["words"], knob.get("any_case", False))
    if kind == "switch":
        return _switch
    if kind == "mac":
        return _mac
    raise ValueError(f"lean_knobs.json: knob {knob['name']} has unknown kind {kind!r}")


# knob name -> its check: None, or one line saying what leanweb would expect
KNOB_VALUES: dict[str, Check] = {knob["name"]: _check_of(knob) for knob in _TABLE["knobs"]}


def knob_value_problem(knobs: dict) -> str | None:
    """The first knob value leanweb would refuse, as one line; None when all are fine."""
    for name, value in knobs.items():
        problem = KNOB_VALUES[name](value) if name in KNOB_VALUES else None
        if problem:
            return f"lean knob {name} = {value!r}: {problem}"
    for conflict in _TABLE["conflicts"]:
        if conflict["knob"] in knobs and set(conflict["with"]) & set(knobs):
            return (f"lean knob {conflict['knob']} conflicts with {'/'.join(conflict['with'])}: "
                    "give one or the other")
    for pair in _TABLE["ordered"]:
        low, high = pair["low"], pair["high"]
        if knobs.get(low, 0) > knobs.get(high, math.inf):
            return f"lean knobs {low} = {knobs[low]} is above {high} = {knobs[high]}"
    return None


def knob_args(knobs: dict) -> list[str]:
    """The leanweb flags of a server's knobs (also the simulated server's: simulate/mapping.py)."""
    argv: list[str] = []
    for name, value in knobs.items():
        # TOML booleans become on/off (leanweb's switches take on|off|true|false)
        argv += [KNOB_FLAGS[name], ("on" if value else "off") if isinstance(value, bool) else str(value)]
    return argv


def requested_cc(knobs: dict) -> str:
    """The congestion control a lean server's knobs ask for: `cc`, else its profile's."""
    return str(knobs.get("cc") or PROFILE_CC.get(str(knobs.get("profile", "bare")), "none"))
