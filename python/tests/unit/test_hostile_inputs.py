"""Hostile inputs by name (docs/testing.md, "Hostile inputs"): each answers one line on stderr
with its documented exit code, and writes nothing the user did not name. The real CLI runs
in-process (as in test_bad_input_property.py); an alarm fails a case that would hang (a FIFO
read) instead of holding the suite. The outputs (--out, a full disk, a read-only mount, a user
without root) are in test_hostile_outputs.py."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_fixtures import DATA, HANG_S, PRESET, one_line, run_cli
from pcap_builder import transfer_with_loss_and_reordering
from record_fixtures import get_row, tiny_stored_spec

from congestlab.rundir import FORMAT_VERSION
from congestlab.runner import StudyRun
from congestlab.spec import load_preset

def variant(tmp_path: Path, name: str, body: str) -> Path:
    """A spec extending the cc-share preset."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'extends = "cc-share"\nname = "{name}"\n{body}')
    return path


# --- specs: `run SPEC --dry-run`, exit 2 -------------------------------------------------------

TOML_NESTING = {
    "arrays 5000 deep": "a = " + "[" * 5000 + "]" * 5000 + "\n",
    "inline tables 3000 deep": "a = " + "{b=" * 3000 + "1" + "}" * 3000 + "\n",
    "a dotted key 3000 deep": "a" + ".a" * 3000 + " = 1\n",
    "a table header 3000 deep": "[a" + ".a" * 3000 + "]\n",
}


@pytest.mark.parametrize("case", TOML_NESTING)
def test_toml_nested_too_deep_is_one_line(tmp_path, case):
    spec = tmp_path / "deep.toml"
    spec.write_text(TOML_NESTING[case])
    one_line(*run_cli("run", str(spec), "--dry-run")[::2], 2, "nested deeper than 64")


SPEC_CASES = {
    "a 10 kB axis label": ('[[experiments]]\nname = "d"\naxes = [{ name = "delay", fields = ["nodes.r.links.sr.delay_ms"], '
                           f'values = [10.0, 20.0], labels = ["a", "{"x" * 10_000}"] }}]\n', "more than 200"),
    "an axis delay of 1e300": ('[[experiments]]\nname = "d"\naxes = [{ name = "delay", fields = '
                               '["nodes.r.links.sr.delay_ms"], values = [10.0, 1e300] }]\n', "delay_ms"),
    "jitter above the delay": ('[set]\n"nodes.r.links.sr.delay_ms" = 5.0\n"nodes.r.links.sr.jitter_ms" = 20.0\n',
                               "jitter_ms 20 exceeds delay_ms 5"),
    "a loopback subnet": ('[set]\n"topology.switches.sl.subnet4" = "127.0.5.0/24"\n', "loopback"),
    "the IPv6 loopback": ('[set]\n"topology.switches.sl.subnet6" = "::/64"\n', "loopback"),
    "a link-local subnet": ('[set]\n"topology.switches.sl.subnet4" = "169.254.3.0/24"\n', "link-local"),
    "an IPv6 link-local subnet": ('[set]\n"topology.switches.sl.subnet6" = "fe80:0:0:1::/64"\n', "link-local"),
    "iperf from its receiver": ('[set]\n"workloads.share.client" = "c"\n"workloads.share.flows.0.client" = "c"\n',
                                "never cross the network"),
    "a rate of 1e15 bit/s": ('[set]\n"workloads.share.flows.0.protocol" = "udp"\n'
                             '"workloads.share.udp_rate_bps" = 1e15\n', "udp_rate_bps"),
}


@pytest.mark.parametrize("case", SPEC_CASES)
def test_a_spec_a_run_would_fail_on_is_refused_by_dry_run(tmp_path, case):
    body, words = SPEC_CASES[case]
    one_line(*run_cli("run", str(variant(tmp_path, "bad", body)), "--dry-run")[::2], 2, words)


def test_a_client_on_its_servers_node(tmp_path):
    spec = tmp_path / "own.toml"
    spec.write_text('extends = "ipv6"\nname = "own"\n[set]\n"workloads.get.requests.0.client" = "server"\n')
    one_line(*run_cli("run", str(spec), "--dry-run")[::2], 2, "requests[0].client", "node of server 'apache'")


def test_dev_zero_as_a_spec_is_not_read():
    """In a child limited to 2 GB: read whole, /dev/zero would take every byte of memory there is."""
    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run([sys.executable, "-m", "congestlab.cli", "run", "/dev/zero", "--dry-run"], capture_output=True,
                          text=True, timeout=HANG_S, preexec_fn=limited)
    one_line(done.returncode, done.stderr, 2, "/dev/zero: is a character device, not a regular file")


@pytest.mark.parametrize("what", ["fifo", "directory", "bom", "missing"])
def test_a_spec_that_is_no_regular_utf8_file(tmp_path, what):
    path = {"fifo": tmp_path / "s.toml", "directory": tmp_path / "d.toml", "bom": tmp_path / "b.toml",
            "missing": tmp_path / "none.toml"}[what]
    if what == "fifo":
        os.mkfifo(path)
    elif what == "directory":
        path.mkdir()
    elif what == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + PRESET.encode())
    want = {"fifo": "a FIFO", "directory": "a directory", "bom": "byte-order mark",
            "missing": "such"}[what]  # (No such file or directory; no such suite file)
    for argv in (["run", str(path), "--dry-run"], ["suite", str(path), "--dry-run"],
                 ["sensitivity", "cc-share", "--axes", str(path), "--dry-run"]):
        code, _, err = run_cli(*argv)
        one_line(code, err, 2, want)


# --- options: one line, exit 2 (click's usage errors) ------------------------------------------

@pytest.mark.parametrize("argv, words", [
    (["run", "x.toml", "--bogus"], ["run: No such option: --bogus", "congestlab run --help"]),
    (["report"], ["report: Missing argument"]),
    (["plan", "x", "--nodes", "abc"], ["plan: Invalid value for '--nodes'"]),
    (["nosuch"], ["No such command"]),
    (["cc", "install", "--x"], ["cc install: No such option"]),
])
def test_an_option_error_is_one_line_exit_2(argv, words):
    one_line(*run_cli(*argv)[::2], 2, *words)


# --- run directories: every reading command, exit 7 ----------------------------------------------

def readers(run: Path, other: Path, tmp_path: Path) -> list[list[str]]:
    return [["report", str(run)], ["analyze", str(run)], ["distance", str(run)], ["rto-replay", str(run)],
            ["plot", str(run), "main.server-apache.level-C1B"], ["plan", str(run), "--nodes", "2"],
            ["compare", str(other), str(run), "--out", str(tmp_path / "cmp")],
            ["reproduce", "ipv6", "--quick", "--dry-run", "--resume", str(run)]]


@pytest.mark.parametrize("damage", ["brackets", "objects", "fifo"])
def test_a_manifest_nested_too_deep_or_special_for_every_command(tmp_path, damage):
    run, other = tmp_path / "run", tmp_path / "other"
    shutil.copytree(DATA / "ipv6-quick-run", run)
    shutil.copytree(DATA / "ipv6-quick-run", other)
    manifest = run / "manifest.json"
    if damage == "brackets":
        manifest.write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "objects":
        stored = json.loads(manifest.read_text())  # a valid manifest with an object 3000 deep inside
        deep = '{"a": ' * 3000 + "1" + "}" * 3000
        manifest.write_text(json.dumps(stored | {"environment": {"deep": "X"}}).replace('"X"', deep))
    else:
        manifest.unlink()
        os.mkfifo(manifest)
    for argv in readers(run, other, tmp_path):
        code, _, err = run_cli(*argv)
        one_line(code, err, 7, "nested deeper than 64" if damage != "fifo" else "a FIFO")
    assert not (tmp_path / "cmp").exists()


def pcap_run(run: Path) -> Path:
    """One repetition with its capture (test_cubic_compound.py's shape); rep.json names it."""
    rep = run / "points" / "main" / "r1"
    (rep / "pcap").mkdir(parents=True)
    conv, _ = transfer_with_loss_and_reordering("v4", t0=1000.0)
    conv.write(rep / "pcap" / "s1.pcap")
    raw = get_row(server="s1", file_kib=504, client_port=40000, start_ts=1000.0, end_ts=1000.3, time_total_s=0.25)
    (rep / "records.jsonl").write_text(json.dumps({"kind": "get_raw", "row": raw}) + "\n")
    (rep / "rep.json").write_text(json.dumps({"servers": {"s1": "i1"}, "captures": {"s1": {"argv": []}}}))
    (run / "manifest.json").write_text(json.dumps({
        "format_version": FORMAT_VERSION, "status": "complete", "axes": [],
        "points": [{"id": "main", "experiment": "main", "axes": {}}], "servers": {"s1": [{"instance": "i1", "port": 80}]},
        "spec": tiny_stored_spec(server="s1", files_kib=(504,))}))
    return rep / "pcap" / "s1.pcap"


@pytest.mark.parametrize("damage, words", [("directory", "is a directory, not a regular file"),
                                           ("fifo", "is a FIFO (named pipe)"),
                                           ("link to /dev/zero", "is a character device"),
                                           ("deleted", "missing (the repetition recorded this capture")])
def test_a_capture_is_refused_by_what_it_is(tmp_path, damage, words):
    pcap = pcap_run(tmp_path / "run")
    assert run_cli("analyze", str(tmp_path / "run"))[0] == 0
    pcap.unlink()
    if damage == "directory":
        pcap.mkdir()
    elif damage == "fifo":
        os.mkfifo(pcap)
    elif damage == "link to /dev/zero":
        pcap.symlink_to("/dev/zero")
    code, out, err = run_cli("analyze", str(tmp_path / "run"))
    one_line(code, err, 6, "1 unusable captures")
    assert words in out and "not in the capture" not in out, out


# --- what --dry-run checks before anything starts ----------------------------------------------

def stored_cc_share(tmp_path: Path) -> Path:
    """A run directory of the cc-share preset as a run leaves it when it starts (test_resume.py)."""
    run_dir = tmp_path / "cc-run"
    run_dir.mkdir()
    first = StudyRun(load_preset("cc-share"), run_dir, quick=True)
    (run_dir / "manifest.json").write_text(json.dumps(first.manifest, default=str))
    return run_dir


def test_dry_run_checks_resume_out_and_cluster(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(PRESET)
    mine = stored_cc_share(tmp_path)
    assert run_cli("run", str(spec), "--quick", "--dry-run", "--resume", str(mine))[0] == 0
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    for argv, code, words in [
        (["--resume", str(tmp_path / "nowhere")], 7, ["no such directory"]),
        (["--resume", str(DATA / "ipv6-quick-run")], 7, ["another spec", "'ipv6'"]),
        (["--resume", str(mine)], 7, ["with --quick"]),  # it ran --quick; this dry run is without
        (["--resume", str(mine), "--out", str(tmp_path / "new")], 7, ["drop --out"]),
        (["--out", str(full)], 7, ["not empty"]),
        (["--out", str(tmp_path / "no" / "such" / "dir")], 7, ["does not exist"]),
        (["--cluster", "bogus.invalid:1"], 8, ["no Ray head answers"]),
        (["--cluster", "127.0.0.1:1"], 8, ["127.0.0.1:1", "Connection refused"]),
        (["--cluster", "bogus"], 8, ["HOST:PORT"]),
    ]:
        one_line(*run_cli("run", str(spec), "--dry-run", *argv)[::2], code, *words)
    assert not (tmp_path / "new").exists() and not (tmp_path / "no").exists()


def test_a_suite_resume_is_checked_under_dry_run(tmp_path):
    one_line(*run_cli("reproduce", "dissertation", "--quick", "--dry-run", "--resume", str(DATA / "ipv6-quick-run"))[::2],
             7, "not a suite run")


# --- messages ----------------------------------------------------------------------------------

def test_clean_without_root_says_why_it_needs_root(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    one_line(*run_cli("clean")[::2], 3, "removes what crashed runs left")
    assert "builds network namespaces" not in run_cli("clean")[2]


def test_a_run_compared_with_itself_is_a_warning(tmp_path):
    run = DATA / "ipv6-quick-run"
    code, out, err = run_cli("compare", str(run), str(run), "--out", str(tmp_path / "cmp"))
    assert code == 0, err
    assert "compared with itself" in " ".join(out.split()), out

