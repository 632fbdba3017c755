"""No traceback from any input: mutated specs, manifests and run directories get one line and a
documented exit code.

A seeded property test (hypothesis, derandomized): each case takes a valid spec (the cc-share
preset) or a valid run directory (the stored ipv6 quick run; a small analysed run with captures,
records, a lean server's log and results: synthetic_run.py small_lean_run), damages it the way a
hand edit, a crash or a wrong tool would (a value of another type, a missing key, a non-finite
number, a loopback or link-local subnet, a 10 kB string, lists 100 deep, a cut, a byte that is not
UTF-8, a byte-order mark, 5000 opening brackets, a line written twice or lost), and runs the real
CLI in-process: `run SPEC --dry-run`, `distance RUN`, and each command that reads a run directory
on the files it reads (records.jsonl, rep.json, the leanweb log, results CSVs). A case passes when
the command either succeeds or answers one line with a documented exit code; an exception
escaping `main()` fails the case (hypothesis then shrinks it).
"""

from __future__ import annotations

import copy
import json
from collections import Counter
import math
import shutil
import time
import tomllib
from importlib import resources
from pathlib import Path

import pytest
import tomli_w
from cli_call import call_cli
from hypothesis import HealthCheck, given, settings, strategies as st


DATA = Path(__file__).parent / "data"
# exit codes a damaged input may give (README): 0 fine, 2 wrong spec, 7 run directory
ALLOWED_CODES = {0, 2, 7}
SPEC_CASES = 1000
MANIFEST_CASES = 1000
CLI_CALLS: list[float] = []  # the monotonic time of every damaged input given to the CLI

def nested(depth: int) -> list:
    """[[[...[1]...]]], `depth` lists deep: beyond what a spec or a manifest may nest
    (congestlab/input_files.py MAX_NESTING), below what the dumpers here recurse to."""
    value: list = [1]
    for _ in range(depth - 1):
        value = [value]
    return value


REPLACEMENTS = [None, "", "x", "10.0.0.0/8", -1, 0, 1, 2**70, 1e308, math.nan, math.inf, True, [], {}, [1, "a"],
                {"a": 1}, "ümlaut", "\x00", "127.0.0.0/24", "fe80::/64", "x" * 10_000, nested(100)]


def paths_of(tree, prefix=()):
    """Every path to a value in a tree of dicts and lists."""
    yield prefix
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list) else ()
    for key, value in items:
        yield from paths_of(value, (*prefix, key))


def mutate(tree, path, replacement):
    """The tree with the value at `path` replaced (None: the key or item removed). Only the
    containers on the path are copied (a deep copy of the stored manifest took half the time)."""
    if not path:
        return replacement if replacement is not None else {}
    tree = copy.copy(tree)
    parent = tree
    for key in path[:-1]:
        parent[key] = copy.copy(parent[key])
        parent = parent[key]
    if replacement is None:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return tree


def damage_bytes(text: bytes, how: str, where: float) -> bytes:
    cut = int(len(text) * where)
    if how == "truncate":
        return text[:cut]
    if how == "not-utf8":
        return text[:cut] + b"\xff\xfe" + text[cut:]
    if how == "bom":  # an editor's UTF-8 byte-order mark
        return b"\xef\xbb\xbf" + text
    if how == "brackets":  # a run of 5000 opening brackets at the cut
        return text[:cut] + b"[" * 5000 + text[cut:]
    return text[:cut] + b"\x00" + text[cut + 1:]


def assert_one_line(code: int, err: str, case: str) -> None:
    assert code in ALLOWED_CODES, f"{case}: exit {code}: {err[-500:]}"
    if code:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("congestlab: "), f"{case}: {err[-500:]}"


SPEC_TEXT = (resources.files("congestlab.spec.presets") / "cc-share.toml").read_text()
SPEC = tomllib.loads(SPEC_TEXT)
SPEC_PATHS = list(paths_of(SPEC))


@pytest.fixture(scope="module")
def spec_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("specs")


def damage_cases(cases: int, tree_paths: list):
    """Seeded cases: a value replaced at one of `tree_paths` (3 in 4) or the bytes damaged."""
    def decorate(test):
        return settings(max_examples=cases, derandomize=True, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck))(
            given(kind=st.sampled_from(["value", "value", "value", "bytes"]),
                  index=st.integers(0, len(tree_paths) - 1), replacement=st.sampled_from(REPLACEMENTS),
                  how=st.sampled_from(["truncate", "not-utf8", "nul", "bom", "brackets"]),
                  where=st.floats(0, 1))(test))
    return decorate


@damage_cases(SPEC_CASES, SPEC_PATHS)
def test_a_damaged_spec_is_one_line(spec_dir, kind, index, replacement, how, where):
    path = spec_dir / "spec.toml"
    if kind == "value":
        tree = mutate(SPEC, SPEC_PATHS[index], replacement)
        try:
            text = tomli_w.dumps(tree).encode() if isinstance(tree, dict) else b"= 1"
        except (TypeError, ValueError):  # a value TOML cannot hold (None inside a list)
            return
        case = f"{'/'.join(map(str, SPEC_PATHS[index]))} = {replacement!r}"
    else:
        text, case = damage_bytes(SPEC_TEXT.encode(), how, where), f"{how} at {where:.3f}"
    path.write_bytes(text)
    CLI_CALLS.append(time.monotonic())
    code, _, err = call_cli("run", str(path), "--dry-run")
    assert_one_line(code, err, case)


MANIFEST = json.loads((DATA / "ipv6-quick-run" / "manifest.json").read_text())
MANIFEST_PATHS = list(paths_of(MANIFEST))


@pytest.fixture(scope="module")
def run_copy(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "run"
    shutil.copytree(DATA / "ipv6-quick-run", run)
    return run


@damage_cases(MANIFEST_CASES, MANIFEST_PATHS)
def test_a_damaged_manifest_is_one_line(run_copy, kind, index, replacement, how, where):
    original = json.dumps(MANIFEST).encode()
    if kind == "value":
        text = json.dumps(mutate(MANIFEST, MANIFEST_PATHS[index], replacement)).encode()
        case = f"{'/'.join(map(str, MANIFEST_PATHS[index]))} = {replacement!r}"
    else:
        text, case = damage_bytes(original, how, where), f"{how} at {where:.3f}"
    (run_copy / "manifest.json").write_bytes(text)
    CLI_CALLS.append(time.monotonic())
    try:
        code, _, err = call_cli("distance", str(run_copy))
    finally:
        (run_copy / "manifest.json").write_bytes(original)
    assert_one_line(code, err, case)


@pytest.mark.parametrize("damage", [
    lambda m: m | {"points": "x"},
    lambda m: m | {"fidelity": []},
    lambda m: m | {"environment": 3} | {"axes": [1, 2]},
    lambda m: [m],
])
def test_wrong_types_in_a_manifest_are_one_line_for_every_reading_command(tmp_path, damage):
    runs = []
    for name in ("a", "b"):
        run = tmp_path / name
        shutil.copytree(DATA / "ipv6-quick-run", run)
        runs.append(run)
    (runs[1] / "manifest.json").write_text(json.dumps(damage(copy.deepcopy(MANIFEST))))
    for argv in (["report", str(runs[1])], ["analyze", str(runs[1])], ["distance", str(runs[1])],
                 ["plot", str(runs[1]), "main.server-apache.level-C1B"],
                 ["compare", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "cmp")]):
        code, _, err = call_cli(*argv)
        assert code == 7 and "damaged manifest" in err, (argv, code, err)
        assert_one_line(code, err, " ".join(argv))


def test_a_missing_run_directory_is_named_as_missing(tmp_path):
    code, _, err = call_cli("report", str(tmp_path / "nowhere"))
    assert code == 7 and "no such directory" in err, err


def test_the_property_ran_at_least_2000_damaged_inputs(request):
    """(After the two property tests, in file order.) Counted, not assumed: hypothesis may
    stop early, and a value TOML cannot hold is skipped before the CLI."""
    if not CLI_CALLS:
        pytest.skip("the property tests were not selected")
    span_s = CLI_CALLS[-1] - CLI_CALLS[0]
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\nbad-input property: {len(CLI_CALLS)} damaged inputs through the CLI in {span_s:.1f} s")
    assert len(CLI_CALLS) >= 2000



# --- damaged run directories: every command that reads one ----------------------------------
# exit codes a damaged run directory may give: 6 analysed with problems, 9 an unreadable leanweb
# log (rto-replay, when no log can be read), 11 no series to draw (plot); 2: plot's point gone
RUN_CODES = {0, 2, 6, 7, 9, 11}
RUN_FILES = {  # file -> what it holds, the commands that read it
    "points/p1/r1/records.jsonl": ("jsonl", ("analyze", "rto-replay")),
    "points/p1/r2/rep.json": ("json", ("analyze", "rto-replay", "report")),
    "logs/servers/www-i1/leanweb.jsonl": ("jsonl", ("analyze", "rto-replay")),
    "results/request.csv": ("csv", ("report", "distance", "plot", "compare")),
    "results/port.csv": ("csv", ("report",)),
}
RUN_CASES = {"analyze": 60, "rto-replay": 60, "report": 60, "distance": 60, "plot": 8, "compare": 30}
CELLS = ["", "x", "-1", "inf", "nan", "9" * 300, "1e308", "True", "0.5", "p2", "\x00"]
RUN_CALLS: dict[str, list[tuple[float, int]]] = {}  # command -> (seconds, exit code) per damaged run


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from synthetic_run import small_lean_run

    run = small_lean_run(tmp_path_factory.mktemp("small"))
    assert call_cli("analyze", str(run))[0] == 0
    return run


@pytest.fixture(scope="module")
def case_run(small_run, tmp_path_factory):
    """A copy of the small run that each case damages and puts back (files as they were, files
    a command added removed): copying the run for each case took most of the property's time."""
    run = tmp_path_factory.mktemp("case") / "run"
    shutil.copytree(small_run, run)
    return run, {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}


def put_back(run: Path, files: dict[Path, bytes]) -> None:
    for path in [p for p in run.rglob("*") if p.is_file() and p not in files]:
        path.unlink()
    for path, data in files.items():
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def damage_lines(text: bytes, kind: str, index: int, replacement, how: str, where: float) -> bytes:
    """One line (a JSON record, a CSV row) changed: a value replaced, or the line written twice
    or lost; or the bytes damaged."""
    lines = text.decode().splitlines(keepends=True)
    at = index % len(lines)
    if kind == "bytes":
        return damage_bytes(text, how if how in ("truncate", "not-utf8", "nul") else "truncate", where)
    if kind == "line":
        return "".join(lines[:at] + ([lines[at]] * 2 if how == "duplicate" else []) + lines[at + 1:]).encode()
    if kind == "csv":
        cells = lines[at].rstrip("\n").split(",")
        cells[index % len(cells)] = CELLS[index % len(CELLS)] if replacement is None else str(replacement)
        return "".join(lines[:at] + [",".join(cells) + "\n"] + lines[at + 1:]).encode()
    tree = json.loads(lines[at])
    paths = list(paths_of(tree))
    lines[at] = json.dumps(mutate(tree, paths[index % len(paths)], replacement)) + "\n"
    return "".join(lines).encode()


def run_cases(command: str, test):
    """`test` as a seeded property over damaged copies of the files `command` reads."""
    files = [f for f, (_, readers) in RUN_FILES.items() if command in readers]
    return settings(max_examples=RUN_CASES[command], derandomize=True, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))(
        given(file=st.sampled_from(files), kind=st.sampled_from(["value", "value", "line", "bytes"]),
              index=st.integers(0, 10**6), replacement=st.sampled_from(REPLACEMENTS),
              how=st.sampled_from(["duplicate", "remove", "truncate", "not-utf8", "nul"]),
              where=st.floats(0, 1))(test))


def damaged_run_case(small_run, case_run, command, file, kind, index, replacement, how, where):
    case, files = case_run
    path = case / file
    holds = RUN_FILES[file][0]
    if holds == "json" and kind == "value":
        tree = json.loads(path.read_text())
        paths = list(paths_of(tree))
        text = json.dumps(mutate(tree, paths[index % len(paths)], replacement)).encode()
    elif holds == "json" and kind == "line":
        text = json.dumps([json.loads(path.read_text())] * 2).encode() if how == "duplicate" else b""
    else:
        text = damage_lines(path.read_bytes(), "csv" if holds == "csv" and kind == "value" else kind, index,
                            None if holds == "csv" else replacement, how, where)
    path.write_bytes(text)
    argv = {"plot": [command, case, "p1"], "compare": [command, small_run, case, "--out", case.parent / "cmp"]}.get(
        command, [command, case])
    started = time.monotonic()
    try:
        code, _, err = call_cli(*argv)
    finally:
        put_back(case, files)
    RUN_CALLS.setdefault(command, []).append((time.monotonic() - started, code))
    assert code in RUN_CODES, f"{command} {file} {kind} {index} {replacement!r} {how}: exit {code}: {err[-500:]}"
    if code:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("congestlab: "), f"{command} {file}: {err[-500:]}"


@pytest.mark.parametrize("command", list(RUN_CASES))
def test_a_damaged_run_directory_is_one_line_for_every_reader(small_run, case_run, command):
    run_cases(command, lambda **case: damaged_run_case(small_run, case_run, command, **case))()


def test_the_run_property_ran_for_every_reader(request):
    """(After the run property, in file order.) Cases and time per command."""
    if not RUN_CALLS:
        pytest.skip("the run property was not selected")
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        for command, calls in RUN_CALLS.items():
            codes = Counter(code for _, code in calls)
            print(f"\nbad-run property: {command}: {len(calls)} damaged run directories in "
                  f"{sum(s for s, _ in calls):.1f} s (exit " + ", ".join(f"{c}: {n}" for c, n in sorted(codes.items()))
                  + ")")
    assert all(len(RUN_CALLS.get(c, [])) >= n // 2 for c, n in RUN_CASES.items())
