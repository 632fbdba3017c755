"""A node's archive lands inside the run directory and nowhere else, with and without
tarfile's "data" filter (Python before 3.11.4 lacks it: Debian 12's 3.11.2)."""

from __future__ import annotations

import io
import tarfile

import pytest

from congestlab.cluster import driver
from congestlab.errors import ClusterError


def archive(path, entries):
    with tarfile.open(path, "w") as tar:
        for name, kind, target in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = 2
                tar.addfile(info, io.BytesIO(b"ok"))
            else:
                info.type, info.linkname = tarfile.SYMTYPE, target
                tar.addfile(info)
    return path


@pytest.fixture(params=["filter", "no filter"])
def python_kind(request, monkeypatch):
    if request.param == "no filter":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def unpack(tmp_path, entries):
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    with tarfile.open(archive(tmp_path / "a.tar", entries)) as tar:
        driver._extract_inside(tar, tar.getmembers(), run_dir)
    return run_dir


def test_a_repetition_unpacks(tmp_path, python_kind):
    run_dir = unpack(tmp_path, [("points/p/r1/rep.json", "file", ""), ("logs/x.log", "file", ""),
                                ("points/p/r1/latest", "link", "rep.json")])
    assert (run_dir / "points/p/r1/rep.json").read_bytes() == b"ok"
    assert (run_dir / "points/p/r1/latest").read_bytes() == b"ok"


@pytest.mark.parametrize("name, kind, target", [("../outside", "file", ""), ("ABS/outside", "file", ""),
                                                 ("points/escape", "link", "../../outside")])
def test_nothing_lands_outside(tmp_path, python_kind, name, kind, target):
    """Refused, or (the filter's way with an absolute name) put inside: never written outside."""
    name = name.replace("ABS", str(tmp_path))
    try:
        unpack(tmp_path, [(name, kind, target)])
    except (ClusterError, getattr(tarfile, "FilterError", ClusterError)):
        pass
    assert not (tmp_path / "outside").exists()
    escape = tmp_path / "run" / "points" / "escape"
    assert not escape.exists() or escape.resolve().is_relative_to(tmp_path / "run")
