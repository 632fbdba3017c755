"""MGEN flows, scripts and log parsing."""

from __future__ import annotations

import gzip

import pytest

from congestlab.spec import load_preset
from congestlab.spec.fieldpath import apply, get_field
from congestlab.spec.sweep import expand
from congestlab.traffic.mgen import allocate_flow_counts, build_flows, parse_sink_log, sink_script, source_script
from congestlab.workloads.mgen import MgenRunner, utc_seconds_of_day

# the MGEN workload as each level of the ipv6 preset sets it
LEVELS = {p.labels["level"]: p.study.workload("bg") for p in expand(load_preset("ipv6"))
          if p.labels["server"] == "apache"}


@pytest.mark.parametrize("level", ["C1B", "C2B", "C3B", "C4B", "C5B", "C6B"])
def test_ten_flows_at_different_rates_add_up_to_the_level(level, within):
    flows = build_flows(LEVELS[level])
    assert len(flows) == 10
    assert len({f.port for f in flows}) == 10
    rates = LEVELS[level].class_rates_bps()
    for cls, rate in ((c, r) for c, r in rates.items() if r):
        members = [f for f in flows if f.cls == cls]
        within(cls, sum(f.rate_bps for f in members), rate, 1e-6)
        assert len({round(f.rate_bps) for f in members}) == len(members), "rates differ within a class"
    for f in flows:
        assert f.payload_bytes == (1460 if f.family == "v4" else 1440)


def test_flow_counts_follow_the_mix():
    assert allocate_flow_counts({"tcp4": 45, "tcp6": 45, "udp4": 5, "udp6": 5}, 10) == {
        "tcp4": 4, "tcp6": 4, "udp4": 1, "udp6": 1}
    counts = allocate_flow_counts({"tcp4": 22.5, "tcp6": 67.5, "udp4": 2.5, "udp6": 7.5}, 10)
    assert sum(counts.values()) == 10 and counts["tcp6"] > counts["tcp4"] >= 1
    assert allocate_flow_counts({"tcp4": 0, "tcp6": 0, "udp4": 0, "udp6": 0}, 10) == {}


def test_scripts_set_ttl_64_and_stop_by_themselves():
    flows = build_flows(LEVELS["C1B"])
    v6 = [f for f in flows if f.family == "v6"]
    src = source_script(v6, "fd00::15", 42.5).splitlines()
    assert src[0] == "TTL 64"
    assert sum(" ON " in line for line in src) == len(v6)
    assert sum(line.startswith("42.500 OFF") for line in src) == len(v6)
    assert sink_script(v6).splitlines()[0] == "TTL 64"


def test_sink_log_rates_in_window(tmp_path, within):
    flows = build_flows(LEVELS["C1B"])[:2]
    lines = ["23:59:59.000000 START Mgen Version 5.02b"]
    # flow 1: 100 messages of 1460 B in the 1 s window (and some outside it)
    t = 86399.5
    for k in range(150):
        ts = (t + k * 0.01) % 86400
        hh, rem = divmod(ts, 3600)
        mm, ss = divmod(rem, 60)
        lines.append(f"{int(hh):02d}:{int(mm):02d}:{ss:09.6f} RECV proto>TCP flow>1 seq>{k} src>10.0.4.20/1 "
                     f"dst>10.0.0.20/5001 sent>00:00:00.0 size>1460 gps>INVALID,999,999,0 ")
    log = tmp_path / "sink.drc.gz"
    with gzip.open(log, "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    rates = parse_sink_log(log, flows, (86399.995, 86400.995))  # crosses midnight
    assert rates[0].messages == 100
    within("achieved", rates[0].achieved_bps, 100 * 1460 * 8, 1e-6)
    assert rates[1].messages == 0


def test_utc_seconds_of_day():
    assert utc_seconds_of_day(86400 * 3 + 5.5) == 5.5


def test_reading_a_growing_log_from_an_offset(tmp_path):
    """A window opened at byte N of a live log counts only lines written after it."""
    flows = build_flows(LEVELS["C1B"])[:1]
    line = "10:00:{:09.6f} RECV proto>TCP flow>1 seq>{} src>a/1 dst>b/5001 sent>00:00:00.0 size>1460 \n"
    log = tmp_path / "sink.drc"
    log.write_text("".join(line.format(k * 0.01, k) for k in range(100)))
    offset = log.stat().st_size
    with open(log, "a") as fh:
        fh.write("".join(line.format(1 + k * 0.01, 100 + k) for k in range(50)))
    window = (36000.0, 36002.0)
    assert parse_sink_log(log, flows, window)[0].messages == 150
    # the line at the offset is taken as cut and skipped: 49 of the 50 new ones
    assert parse_sink_log(log, flows, window, offset)[0].messages == 49


def _directions(workload) -> dict[str, tuple[str, str]]:
    """class -> (sending host, receiving host) as the MGEN runner starts them."""
    runner = MgenRunner(workload, ctx=None, log_dir=None)
    return {f.cls: (src, dst) for _, _, src, dst, flows in runner._groups() for f in flows}


def test_ipv6_preset_sends_udp_against_tcp_as_seed_001_iii():
    # "TCP source and UDP sink" on the server side, "TCP sink and UDP source" on the client side
    assert _directions(LEVELS["C1B"]) == {"tcp4": ("m4src", "m4snk"), "tcp6": ("m6src", "m6snk"),
                                          "udp4": ("m4snk", "m4src"), "udp6": ("m6snk", "m6src")}


def test_udp_from_is_one_sweepable_field_beside_per_class_reverse():
    bg = LEVELS["C1B"]
    with_tcp = bg.model_copy(update={"udp_from": "source"})
    assert with_tcp.reversed_classes() == frozenset()
    assert set(_directions(with_tcp).values()) == {("m4src", "m4snk"), ("m6src", "m6snk")}
    both = bg.model_copy(update={"reverse": ["tcp6"]})
    assert both.reversed_classes() == {"tcp6", "udp4", "udp6"}
    assert _directions(both)["tcp6"] == ("m6snk", "m6src")
    point = expand(load_preset("ipv6"), quick=True)[2]
    data = point.study.model_dump(mode="json")
    assert get_field(apply(data, {"workloads.bg.udp_from": "source"}), "workloads.bg.udp_from") == "source"


def _runner_with_sink_log(tmp_path, workload, window_s: float, deficit_pct: float, measured_bytes: float,
                          drop_every: int = 0):
    """An MGEN runner whose one sink log shows its flows `deficit_pct` short of their rates
    over a window of `window_s` that held `measured_bytes` of measured requests; with
    `drop_every` n, every n-th message sent is missing from the log (lost on the way)."""
    runner = MgenRunner(workload, ctx=None, log_dir=tmp_path)
    flows = runner.flows
    start = 36000.0  # 10:00:00 UTC
    lines = []
    for f in flows:
        bytes_due = f.rate_bps / 8 * window_s * (1 - deficit_pct / 100)
        count = max(1, round(bytes_due / f.payload_bytes))
        for k in range(count):
            if drop_every and k % drop_every == drop_every - 1:
                continue
            ts = start + (k + 0.5) * window_s / count
            hh, rem = divmod(ts, 3600)
            mm, ss = divmod(rem, 60)
            lines.append(f"{int(hh):02d}:{int(mm):02d}:{ss:09.6f} RECV proto>TCP flow>{f.flow_id} seq>{k} src>a/1 "
                         f"dst>b/{f.port} sent>00:00:00.0 size>{f.payload_bytes} \n")
    log = tmp_path / "bg-v4-sink.drc"
    log.write_text("".join(sorted(lines)))
    runner.sink_logs = [(log, flows)]
    day0 = 86400 * 20000  # an epoch at UTC midnight
    runner.open_window(measured_bytes)
    runner.span_epoch_s = [day0 + start, day0 + start + window_s]
    return runner


def test_a_background_window_too_short_for_its_measured_bytes_is_not_checked(tmp_path):
    # --until-decisive's late rounds: a unit ran one repetition (two 320 KiB GETs, 0.45 s) and
    # the GETs' own share of the bottleneck lowered the background's rate by 4 %
    bg = LEVELS["C1B"]
    get_bytes = 2 * 320 * 1024
    check = _runner_with_sink_log(tmp_path, bg, 0.45, 4.0, get_bytes).lifetime_checks()[0]
    minimum_s = 8 * get_bytes / (75e6 * 0.03)  # 2.33 s: one repetition's bytes are 3 % of 75 Mbit/s
    assert check.ok is None
    assert check.message == f"not checked: window 0.45 s < {minimum_s:.2f} s"
    assert check.value == pytest.approx(-4.0, abs=0.5)


def test_a_background_short_over_a_long_enough_window_fails(tmp_path):
    check = _runner_with_sink_log(tmp_path, LEVELS["C1B"], 5.0, 4.0, 2 * 320 * 1024).lifetime_checks()[0]
    assert check.ok is False and "beyond ±3 %" in check.message
    fine = _runner_with_sink_log(tmp_path, LEVELS["C4B"], 5.0, 1.0, 2 * 320 * 1024).lifetime_checks()[0]
    assert fine.ok is True and fine.message == ""


def test_a_udp_background_is_checked_on_what_it_sent_and_its_loss_reported(tmp_path):
    """A congested bottleneck drops UDP: the sink receives 10 % less than the source sent.
    The sequence numbers' gaps show the source kept its rate: the check passes and names the
    loss; a source that sent 10 % short (no gaps) still fails."""
    bg = LEVELS["C1B"].model_copy(update={"mix": {"udp4": 50, "udp6": 50}})
    runner = _runner_with_sink_log(tmp_path, bg, 5.0, 0.0, None, drop_every=10)
    check = runner.lifetime_checks()[0]
    assert check.ok is True and check.value == pytest.approx(0.0, abs=0.5)
    assert "the path lost 10.0 % of the" in check.message
    runner.window_offsets = {}  # the window's log from its start
    (record,) = [r for kind, r in runner.measure(tuple(runner.span_epoch_s))[0] if r["cls"] == "udp4"]
    assert record["loss_pct"] == pytest.approx(10.0, abs=0.5)
    assert record["deviation_pct"] == pytest.approx(-10.0, abs=0.5)  # received, as before
    assert record["sent_bps"] == pytest.approx(record["requested_bps"], rel=0.01)
    short = _runner_with_sink_log(tmp_path, bg, 5.0, 10.0, None).lifetime_checks()[0]
    assert short.ok is False and "background sent" in short.message and "lost" not in short.message


def test_a_window_whose_measured_bytes_are_unknown_is_checked(tmp_path):
    check = _runner_with_sink_log(tmp_path, LEVELS["C1B"], 0.45, 4.0, None).lifetime_checks()[0]
    assert check.ok is False


def test_a_repetition_of_ipv6_moves_two_320_kib_files():
    from congestlab.runner.measuring import measured_bytes

    point = next(p for p in expand(load_preset("ipv6")) if p.labels["level"] == "C1B")
    assert measured_bytes(point.study, point) == 2 * 320 * 1024
