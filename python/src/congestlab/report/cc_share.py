"""report.md of a cc-share run (spec/presets/cc-share.toml): each flow's share of the
bottleneck, from results/iperf.csv (cc/share.py computes the shares)."""

from __future__ import annotations

from pathlib import Path

from congestlab.cc.share import markdown_table, shares
from congestlab.errors import RunDirError
from congestlab.report.build import Report, _html_page
from congestlab.rundir import read_manifest


def build_report(run_dir: Path) -> Report:
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir, require_complete=False)
    spec = manifest["spec"]
    rows = shares(run_dir)
    if not rows:
        raise RunDirError(f"{run_dir}: results/iperf.csv holds no flow")
    checks = manifest.get("fidelity", {}).get("checks", [])
    md = [f"# {spec.get('title') or spec['name']}", "",
          f"Source: {spec.get('source', '')}. Run status **{manifest.get('status')}**; "
          f"quick: {manifest.get('quick')}; congestion controls installed for the run: "
          f"{manifest.get('congestion_control', {}).get('installed_for_this_run', [])}.", "",
          markdown_table(rows), ""]
    if checks:
        md += ["## Fidelity checks", "", "| check | ok | value | expected | detail |", "|---|---|---|---|---|"]
        md += [f"| {c['name']} | {'yes' if c['ok'] else '**NO**'} | {c['value']} | {c['expected']} | {c['message']} |"
               for c in checks]
        md.append("")
    markdown = "\n".join(md) + "\n"
    md_path = run_dir / "report.md"
    md_path.write_text(markdown)
    html_path = run_dir / "report.html"
    html_path.write_text(_html_page(spec.get("title") or spec["name"], markdown))
    console = {"cc-share: each flow's share of the bottleneck": (
        ("pair", "rep", "flow", "cc", "ss -ti", "Mbit/s", "share %", "% of fair", "retx"),
        [[r.pair, str(r.repetition), str(r.flow), r.cc, r.kernel_cc, f"{r.rate_bps / 1e6:.1f}",
          f"{r.share_of_total_pct:.1f}", f"{r.pct_of_fair_share:.1f}", str(r.retransmits)] for r in rows])}
    warnings = manifest.get("fidelity", {}).get("warnings", [])
    return Report(md_path, html_path, [], console, warnings)
