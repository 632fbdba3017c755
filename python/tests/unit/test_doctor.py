"""`congestlab doctor` names every built artefact a study needs and the command that fixes it."""

from __future__ import annotations


from congestlab import doctor
from congestlab.errors import ToolError


def _by_name(items):
    return {item.name: item for item in items}


def test_doctor_lists_the_rust_binaries_the_bpf_object_and_chromium():
    items = _by_name(doctor.diagnose())
    for name in ("leanweb", "dualbench", "linkem", "traceanalyze", "leansim", "compound-bpf", "chromium"):
        assert name in items, sorted(items)
    assert items["chromium"].required is False


def test_doctor_says_make_build_for_a_missing_binary_and_object(monkeypatch, tmp_path):
    def not_built(name):
        raise ToolError([name], None, f"{name} is not built; run `make build`")

    monkeypatch.setattr(doctor, "rust_binary", not_built)
    monkeypatch.setattr(doctor, "default_object", lambda kernel_name: tmp_path / "absent.bpf.o")
    items = _by_name(doctor.diagnose())
    for name in ("leanweb", "traceanalyze", "compound-bpf"):
        assert not items[name].ok and items[name].required
        assert items[name].fix == "make build"
    assert "absent.bpf.o" in items["compound-bpf"].detail
