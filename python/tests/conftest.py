"""Shared test helpers: netns tests need root; one tolerance assertion for measurements."""

from __future__ import annotations

import os

import pytest


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
