"""report.html in a real browser: headless Chromium (Debian package `chromium`, mk/report.mk)
loads the page from disk and dumps the DOM it built; the tables, figures and findings must be
in it. Skipped only when Chromium is not installed."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from congestlab.report import build_report
from report_fixtures import anma_run, realistic_ipv6, tcplab_run

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _chromium(*args: str, timeout_s: float = 90) -> subprocess.CompletedProcess:
    argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--user-data-dir=/tmp/congestlab-chromium-test", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; mk/report.mk)")
def test_report_html_loads_in_chromium(tmp_path):
    report = build_report(realistic_ipv6(repetitions=3).write(tmp_path / "run"))
    done = _chromium("--dump-dom", report.html_path.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Dom()
    dom.feed(done.stdout)
    tables = [a for t, a in dom.tags if t == "table"]
    images = [a for t, a in dom.tags if t == "img"]
    assert sum(a.get("class") == "data" for a in tables) == 7
    assert sum(a.get("class") == "findings" for a in tables) == 1
    assert sum(a.get("class") == "fidelity" for a in tables) == 1
    assert len(images) == 5 and all(a["src"].startswith("data:image/svg+xml;base64,") for a in images)
    text = " ".join(dom.text)
    assert "Table 41" in text and "does not hold" in text and "Warnings" in text
    assert [a.get("id") for t, a in dom.tags if t == "tr" and a.get("id", "").startswith("finding-")] == [
        f"finding-{n}" for n in ("14", "15", "16", "17", "18", "Q", "Q15", "Q18")]
    # a phone-sized window lays it out (the page has a viewport meta and scroll containers)
    shot = tmp_path / "phone.png"
    done = _chromium(f"--screenshot={shot}", "--window-size=390,2400", report.html_path.as_uri())
    assert done.returncode == 0 and shot.stat().st_size > 10_000


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; mk/report.mk)")
@pytest.mark.parametrize("builder, tables, figures, claims", [
    (tcplab_run, 7, 10, ["19a", "19b", "19c", "19d", "19e", "19f", "19g"]),
    (anma_run, 4, 3, ["20a", "20b", "20c", "20d", "20e"]),
])
def test_tcplab_and_anma_reports_load_in_chromium(tmp_path, builder, tables, figures, claims):
    report = build_report(builder().write(tmp_path / "run"))
    done = _chromium("--dump-dom", report.html_path.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = Dom()
    dom.feed(done.stdout)
    assert sum(t == "table" and a.get("class") == "data" for t, a in dom.tags) == tables
    assert sum(t == "img" for t, a in dom.tags) == figures
    assert [a["id"].removeprefix("finding-") for t, a in dom.tags
            if t == "tr" and a.get("id", "").startswith("finding-")] == claims
