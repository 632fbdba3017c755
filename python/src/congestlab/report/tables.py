"""Markdown tables shaped like seed 000's Tables 39-42: v4 beside v6 per level, with the
study's published numbers beside ours."""

from __future__ import annotations

METRICS = {
    "throughput": ("nrt_throughput_mbps", "Throughput (NRT) in Mbit/s", "nrt_throughput_mbps"),
    "delay": ("delay_ms", "Delay in ms", "delay_ms"),
}


def index_summary(summary: list[dict]) -> dict[tuple[str, str, str], dict]:
    return {(r["server"], r["level"], r["family"]): r for r in summary}


def index_published(published: list[dict]) -> dict[tuple[str, str, str], dict]:
    return {(p["server"], p["level"], p["family"]): p for p in published}


def _cell(row: dict | None, metric: str) -> str:
    if not row:
        return "–"
    mean, sd = float(row[f"{metric}_mean"]), float(row[f"{metric}_sd"])
    digits = 1 if metric == "delay_ms" else 2
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def _published(value) -> str:
    return "–" if value is None else f"{value:g}"


def metric_table(server: str, kind: str, levels: list[str], summary: dict, published: dict) -> str:
    metric, title, pub_key = METRICS[kind]
    lines = [
        f"**{server}: {title}** (mean ± sd over repetitions; study = published value)",
        "",
        "| Level | V4 (ours) | V6 (ours) | V4 (study) | V6 (study) |",
        "|---|---:|---:|---:|---:|",
    ]
    for level in levels:
        v4, v6 = summary.get((server, level, "v4")), summary.get((server, level, "v6"))
        p4 = published.get((server, level, "v4"), {}).get(pub_key)
        p6 = published.get((server, level, "v6"), {}).get(pub_key)
        lines.append(f"| {level} | {_cell(v4, metric)} | {_cell(v6, metric)} | {_published(p4)} | {_published(p6)} |")
    return "\n".join(lines) + "\n"


def detail_table(server: str, levels: list[str], summary: dict) -> str:
    lines = [
        f"**{server}: goodput, captured throughput and retransmissions** (means)",
        "",
        "| Level | Family | n | Goodput Mbit/s | Captured Mbit/s | Retransmissions |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for level in levels:
        for fam in ("v4", "v6"):
            row = summary.get((server, level, fam))
            if row:
                lines.append(f"| {level} | {fam} | {row['n']} | {float(row['goodput_mbps_mean']):.2f} | "
                             f"{float(row['captured_throughput_mbps_mean']):.2f} | "
                             f"{float(row['retransmissions_mean']):.2f} |")
    return "\n".join(lines) + "\n"


def fidelity_table(manifest: dict, per_point: dict[tuple[str, str], dict]) -> str:
    """per_point: (server, level) -> requested_bps, achieved_bps, drops, cpu_busy_pct (means
    over the repetitions)."""
    lines = ["| Server | Level | Background requested Mbit/s | achieved Mbit/s | deviation | bottleneck drops | CPU busy % |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for (server, level), info in per_point.items():
        req, got = info.get("requested_bps"), info.get("achieved_bps")
        if req:
            lines.append(f"| {server} | {level} | {req / 1e6:.2f} | {got / 1e6:.2f} | {(got - req) / req * 100:+.1f} % | "
                         f"{info['drops']:.0f} | {info['cpu_busy_pct']:.1f} |")
        else:
            lines.append(f"| {server} | {level} | 0 | – | – | {info['drops']:.0f} | {info['cpu_busy_pct']:.1f} |")
    other = [c for c in manifest.get("fidelity", {}).get("checks", []) if not c["name"].startswith("background_rate_")]
    if other:
        lines += ["", "| Check | ok | value | expected | detail |", "|---|---|---|---|---|"]
        lines += [f"| {c['name']} | {'yes' if c['ok'] else '**no**'} | {c['value']} | {c['expected']} | "
                  f"{c.get('message') or ''} |" for c in other]
    return "\n".join(lines) + "\n"


def console_table(server: str, levels: list[str], summary: dict, published: dict) -> list[list[str]]:
    rows = []
    for level in levels:
        row = [level]
        for metric, pub_key in (("delay_ms", "delay_ms"), ("nrt_throughput_mbps", "nrt_throughput_mbps")):
            for fam in ("v4", "v6"):
                s = summary.get((server, level, fam))
                row.append(_cell(s, metric))
                p = published.get((server, level, fam), {}).get(pub_key)
                row.append(_published(p))
        rows.append(row)
    return rows
