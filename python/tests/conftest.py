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
    """within(what, measured, expected, tolerance): one shared tolerance assertion."""

    def check(what: str, measured: float, expected: float, tolerance: float) -> None:
        assert abs(measured - expected) <= tolerance, (
            f"{what}: measured {measured:g}, expected {expected:g} ± {tolerance:g}")

    return check
