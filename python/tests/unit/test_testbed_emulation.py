"""Link impairments: which ends and directions, netem commands, linkem chains, emulator choice."""

from __future__ import annotations

from importlib import resources

import pytest

from congestlab.errors import SpecError, TestbedError
from congestlab.spec.loader import parse_spec
from congestlab.testbed import emulation
from congestlab.testbed.layout import build_layout

PRESET = (resources.files("congestlab.spec.presets") / "ipv6.toml").read_text()


def _layout(r1_s0_extra: str = "", client_extra: str = ""):
    text = PRESET.replace("rate_bps = 100_000_000, queue_packets = 1000 }",
                          f"rate_bps = 100_000_000, queue_packets = 1000{r1_s0_extra} }}", 1)
    text = text.replace('{ switch = "s0", host_id = 10 }', f'{{ switch = "s0", host_id = 10{client_extra} }}', 1)
    return build_layout(parse_spec(text, "x.toml").topology, "cl0a1b2c")


def test_no_impairment_by_default():
    assert emulation.impairments(_layout()) == []


def test_both_directions_of_a_host_link_use_output_and_input(tmp_path):
    found = emulation.impairments(_layout(client_extra=", delay_ms = 10, jitter_ms = 1, loss = 0.01"))
    assert [imp.label for imp in found] == ["client/eth0/egress", "client/eth0/ingress"]
    out, inp = emulation.linkem_elements(found, tmp_path)
    assert (out.chain, out.out_iface, out.in_iface) == ("OUTPUT", "eth0", None)
    assert (inp.chain, inp.out_iface, inp.in_iface) == ("INPUT", None, "eth0")
    assert out.queue_num != inp.queue_num and out.netns == "cl0a1b2c-client"
    assert "--delay-ms" in out.linkem_argv() and "0.01" in out.linkem_argv()


def test_router_end_uses_forward_and_one_direction(tmp_path):
    found = emulation.impairments(_layout(r1_s0_extra=', delay_ms = 20, impair_direction = "egress"'))
    (imp,) = found
    (element,) = emulation.linkem_elements(found, tmp_path)
    assert imp.label == "r1/eth0/egress" and element.chain == "FORWARD" and element.out_iface == "eth0"


def test_netem_replaces_the_fifo_under_the_shaper_and_roots_elsewhere():
    layout = _layout(r1_s0_extra=", delay_ms = 20, loss = 0.01", client_extra=", delay_ms = 5, jitter_ms = 2")
    steps = [" ".join(s.argv) for s in emulation.netem_steps(layout, emulation.impairments(layout))]
    assert "tc -n cl0a1b2c-r1 qdisc replace dev eth0 parent 1:10 handle 10: netem limit 1000 delay 20ms loss 1%" \
        in steps
    # the ingress of r1's end is the switch port's egress
    assert any(s.startswith("tc -n cl0a1b2c-sw-s0 qdisc replace dev ") and "delay 20ms loss 1%" in s for s in steps)
    assert "tc -n cl0a1b2c-client qdisc add dev eth0 root handle 1: netem limit 1000 delay 5ms 2ms" in steps


def test_emulator_choice():
    assert emulation.choose_emulator("auto", False, "unknown qdisc") == "linkem"
    assert emulation.choose_emulator("auto", True, "") == "netem"
    assert emulation.choose_emulator("linkem", True, "") == "linkem"
    with pytest.raises(TestbedError, match="no netem: unknown qdisc"):
        emulation.choose_emulator("netem", False, "unknown qdisc")


def test_loss_must_be_a_fraction():
    with pytest.raises(SpecError, match="loss"):
        _layout(client_extra=", loss = 1.5")
