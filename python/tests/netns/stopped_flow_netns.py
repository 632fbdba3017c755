"""What test_stopped_pytest_netns.py runs pytest on and stops part-way (no `test_` in the file
name: pytest collects it only when named). As test_cc_compound.py does: a module fixture
registers Compound TCP with the owner note, the test builds a dumbbell and drives an iperf3
flow through it, here for a minute; the prefix and kernel name come from the stopping test."""

from __future__ import annotations

import os

import pytest
from cc_helpers import build_object, registered
from test_cc_compound import dumbbell, one_flow

from congestlab.testbed import Testbed

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="needs root")]

PREFIX = os.environ.get("STOPPED_TEST_PREFIX", "")
KERNEL_NAME = os.environ.get("STOPPED_TEST_CC", "")
FLOW_S = 60


@pytest.fixture(scope="module")
def ctcp(tmp_path_factory) -> str:
    if not PREFIX or not KERNEL_NAME:
        pytest.skip("started by test_stopped_pytest_netns.py only")
    with registered(KERNEL_NAME, build_object(KERNEL_NAME, tmp_path_factory.mktemp("ctcp")),
                    note_prefix=PREFIX) as name:
        yield name


def test_a_minute_of_compound_through_a_dumbbell(ctcp, tmp_path):
    with Testbed(dumbbell(100), prefix=PREFIX, kernel_cc={"s1": ctcp, "c": "cubic"}) as tb:
        one_flow(tb, tmp_path, FLOW_S)
