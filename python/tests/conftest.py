"""Shared test helpers: netns tests need root; one tolerance assertion for measurements."""

from __future__ import annotations

import os
import signal

import pytest

# The Ctrl-C tests send SIGINT to the congestlab processes they start. A shell that starts the
# suite in the background without job control (`make test &` in a script, nohup) ignores SIGINT,
# and an ignored signal is inherited across exec: the CLI would never see the Ctrl-C. Python's
# own handler here makes the children start with the default disposition again.
signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root: builds real network namespaces")
    for item in items:
        if "netns" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def within():
    """within(what, measured, expected, tolerance, late=0): one shared tolerance assertion.
    `late`: how much more a delay a user-space element adds may come out when the machine is
    busy (it wakes up late, never early), measured under `stress-ng --cpu 2`."""

    def check(what: str, measured: float, expected: float, tolerance: float, late: float = 0.0) -> None:
        assert expected - tolerance <= measured <= expected + tolerance + late, (
            f"{what}: measured {measured:g}, expected {expected:g} ± {tolerance:g}"
            + (f" (+{late:g} under load)" if late else ""))

    return check
