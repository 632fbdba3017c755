"""LinkemElement without root: the commands it would run, and what it refuses."""

from __future__ import annotations

import tempfile

import pytest

from congestlab.errors import SpecError, TestbedError
from congestlab.linkem import GilbertElliott, LinkemElement
from congestlab.linkem import element as element_module


def element(tmp_path, **kw) -> LinkemElement:
    base = dict(netns="tab12-r", queue_num=5, in_iface="tab12-ra", out_iface="tab12-rb",
                delay_ms=20.0, log_dir=tmp_path)
    base.update(kw)
    return LinkemElement(**base)


def test_linkem_argv_runs_inside_the_namespace(tmp_path):
    e = element(tmp_path, jitter_ms=2.5, loss=0.01, seed=9, reorder=True,
                gilbert_elliott=GilbertElliott(p=0.01, r=0.25))
    argv = e.linkem_argv("/x/linkem")
    assert argv[:5] == ["ip", "netns", "exec", "tab12-r", "/x/linkem"]
    flags = dict(zip(argv[5::2], argv[6::2]))
    assert flags["--queue-num"] == "5" and flags["--delay-ms"] == "20.0"
    assert flags["--jitter-ms"] == "2.5" and flags["--loss"] == "0.01" and flags["--seed"] == "9"
    assert "--reorder" in argv
    i = argv.index("--ge-p")
    assert argv[i:i + 8] == ["--ge-p", "0.01", "--ge-r", "0.25", "--ge-loss-good", "0.0", "--ge-loss-bad", "1.0"]
    assert flags["--stats"] == str(tmp_path / "linkem-q5.stats.json")


def test_linkem_rules_are_per_family_in_the_namespace_forward_chain(tmp_path):
    add = element(tmp_path, match=["-p", "tcp"]).rule_argvs("-A")
    assert [r[4] for r in add] == ["iptables", "ip6tables"]
    for rule in add:
        assert rule[:4] == ["ip", "netns", "exec", "tab12-r"]
        assert rule[5:8] == ["-w", "-A", "FORWARD"]
        assert rule[-3:] == ["NFQUEUE", "--queue-num", "5"]
        assert ["-i", "tab12-ra", "-o", "tab12-rb", "-p", "tcp"] == rule[8:14]
    delete = element(tmp_path, families=("ipv4",)).rule_argvs("-D")
    assert len(delete) == 1 and delete[0][6] == "-D"


@pytest.mark.parametrize("kw, field", [
    ({"loss": 1.5}, "loss"),
    ({"duplicate": -0.1}, "duplicate"),
    ({"delay_ms": -1}, "delay_ms"),
    ({"jitter_ms": -1}, "jitter_ms"),
    ({"queue_num": 70000}, "queue_num"),
    ({"max_held": 0}, "max_held"),
    ({"gilbert_elliott": GilbertElliott(p=0.1, r=0.0)}, "gilbert_elliott.r"),
    ({"gilbert_elliott": GilbertElliott(p=2.0, r=0.1)}, "gilbert_elliott.p"),
    ({"in_iface": None, "out_iface": None}, "in_iface"),
    ({"families": ("ipx",)}, "families"),
])
def test_linkem_bad_values_are_spec_errors_naming_the_field(tmp_path, kw, field):
    with pytest.raises(SpecError, match=field):
        element(tmp_path, **kw)


def test_linkem_stats_before_start_is_a_clear_error(tmp_path):
    with pytest.raises(TestbedError, match="not running"):
        element(tmp_path).stats()


def test_linkem_stop_without_start_is_harmless(tmp_path):
    assert element(tmp_path).stop() is None


def test_constructing_and_checking_an_element_without_log_dir_makes_nothing_on_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where a temporary log_dir would go
    e = element(None)
    with pytest.raises(SpecError):
        element(None, loss=2.0)
    assert e.rule_argvs("-A") and e.stop() is None
    with pytest.raises(TestbedError, match="no log_dir until start"):
        e.linkem_argv()
    assert list(tmp_path.iterdir()) == []


class _FakeLinkem:
    """A linkem process that is ready at once and exits on SIGTERM (no namespace, no NFQUEUE)."""

    pid = 4_000_000

    def __init__(self, argv, stdout, stderr, stdin):
        stdout.write(b'{"event":"ready"}\n')
        stdout.flush()
        self.returncode = None

    def poll(self):
        return self.returncode

    def send_signal(self, sig):
        self.returncode = 0

    def wait(self, timeout=None):
        return self.returncode


@pytest.mark.parametrize("given", [False, True])
def test_a_temporary_log_dir_lives_from_start_to_stop_and_a_given_one_stays(tmp_path, monkeypatch, given):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(element_module.os, "geteuid", lambda: 0)
    monkeypatch.setattr(element_module.subprocess, "Popen", _FakeLinkem)
    monkeypatch.setattr(element_module, "rust_binary", lambda name: "/x/linkem")
    monkeypatch.setattr(element_module, "_run", lambda argv: "")  # the NFQUEUE rules
    e = element(tmp_path / "logs" if given else None)
    e.start()
    log_dir = e.log_dir
    assert e.stdout_path.read_text().startswith('{"event":"ready"}')
    assert log_dir.parent == (tmp_path if given else tmp_path / "tmp")
    e.stop()
    assert log_dir.is_dir() == given and (e.log_dir == log_dir) == given
    assert list((tmp_path / "tmp").iterdir()) == []
