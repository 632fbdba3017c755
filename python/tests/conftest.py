"""Shared test helpers: netns tests need root; one tolerance assertion for measurements."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from congestlab.errors import Interrupted

# The Ctrl-C tests send SIGINT to the congestlab processes they start. A shell that starts the
# suite in the background without job control (`make test &` in a script, nohup) ignores SIGINT,
# and an ignored signal is inherited across exec: the CLI would never see the Ctrl-C. Python's
# own handler here makes the children start with the default disposition again.
signal.signal(signal.SIGINT, signal.default_int_handler)


class _Stop:
    """SIGTERM (`kill PID`, a CI's timeout, `make test`'s process group) stops the session as
    Ctrl-C does, so every fixture's finalizer runs: testbeds torn down, BPF objects
    unregistered (docs/testing.md, a stopped test leaves nothing). Python's default would
    end the process at once, leaving all of that behind."""

    session: pytest.Session | None = None
    requested = False
    tearing_down = 0  # >0 inside a teardown: the signal only asks to stop after it

    @classmethod
    def on_sigterm(cls, signum, frame) -> None:
        first = not cls.requested
        cls.requested = True
        if cls.session is not None:
            cls.session.shouldstop = "SIGTERM"
        # once: make forwards the group's SIGTERM to its child again, and an exception
        # raised inside a finalizer would cut that finalizer short
        if first and not cls.tearing_down:
            print("\nSIGTERM: stopping; tearing down", file=sys.stderr, flush=True)
            raise KeyboardInterrupt


signal.signal(signal.SIGTERM, _Stop.on_sigterm)


def pytest_sessionstart(session):
    _Stop.session = session


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    _Stop.tearing_down += 1
    try:
        return (yield)
    finally:
        _Stop.tearing_down -= 1


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    _Stop.tearing_down += 1  # the session's fixtures (runner.py: teardown_exact)
    try:
        return (yield)
    finally:
        _Stop.tearing_down -= 1


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    # A run inside the test (runner/host.py: sigterm_as_interrupt) takes SIGTERM itself and
    # raises Interrupted; a test that expects that catches it, so one that reaches here
    # means the session was asked to stop.
    if call.excinfo is not None and call.excinfo.errisinstance(Interrupted) and "SIGTERM" in str(call.excinfo.value):
        item.session.shouldstop = "SIGTERM"
    return report


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
