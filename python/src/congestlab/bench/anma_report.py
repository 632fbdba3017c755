"""The ANMA study's report from a run directory alone (no root): the slides' table shape
(seed 004, "Result (connection data)" and "Result (time data)") per server, and a plot of
per-pattern continuation time per family."""

from __future__ import annotations

from pathlib import Path

from congestlab.bench.results import DualbenchReport, read_report

# (name, v6 entries, v4 entries): the slides' five ratios
PATTERNS = [("A", 1, 1), ("B", 4, 1), ("C", 1, 4), ("D", 1, 0), ("E", 0, 1)]

# The slides' results (FreeBSD 4.7, PIII 800 MHz): sent v6/v4, NORMAL v6/v4, RESET v6/v4,
# avg establishment µs v6/v4, avg continuation ms v6/v4 (None: no requests of that family).
SLIDES = {
    "A": ((5000, 5000), (4536, 4537), (464, 463), (12.4, 1.3), (2.7113, 1.9317)),
    "B": ((8001, 1999), (7276, 1822), (725, 177), (14.4, 1.5), (2.7146, 1.9640)),
    "C": ((2001, 7999), (1815, 7522), (186, 747), (8.7, 0.9), (2.7339, 1.9154)),
    "D": ((10000, 0), (9064, 0), (936, 0), (10.0, None), (2.7176, None)),
    "E": ((0, 10000), (0, 8993), (0, 1007), (None, 1.3), (None, 1.8871)),
}

TABLE_HEADER = ("| Pattern | v6:v4 | sent v6 | sent v4 | NORMAL v6 | NORMAL v4 | RESET v6 | RESET v4 | "
                "TIMEOUT v6 | TIMEOUT v4 | refused v6 | refused v4 | other v6 | other v4 | est. µs v6 | est. µs v4 | cont. ms v6 | cont. ms v4 |")


def pattern_json(run_dir: Path, server: str, pattern: str) -> Path:
    return Path(run_dir) / "patterns" / f"{server}-{pattern}.json"


def _time(value: float, count: int, digits: int) -> str:
    return f"{value:.{digits}f}" if count else "–"


def table_row(pattern: str, ratio: str, rep: DualbenchReport) -> list[str]:
    v6, v4 = rep.family("v6"), rep.family("v4")
    return [pattern, ratio, str(v6.requests), str(v4.requests), str(v6.normal), str(v4.normal), str(v6.reset),
            str(v4.reset), str(v6.timeout), str(v4.timeout), str(v6.refused), str(v4.refused), str(v6.other),
            str(v4.other),
            _time(v6.connect_us.avg, v6.connect_us.count, 1), _time(v4.connect_us.avg, v4.connect_us.count, 1),
            _time(v6.continuation_ms.avg, v6.continuation_ms.count, 4),
            _time(v4.continuation_ms.avg, v4.continuation_ms.count, 4)]


def slides_rows() -> list[list[str]]:
    rows = []
    for name, n6, n4 in PATTERNS:
        sent, normal, reset, est, cont = SLIDES[name]
        fmt = lambda v, d: "–" if v is None else f"{v:.{d}f}"  # noqa: E731
        rows.append([name, f"{n6}:{n4}", *map(str, sent), *map(str, normal), *map(str, reset), "–", "–", "–", "–", "–", "–",
                     fmt(est[0], 1), fmt(est[1], 1), fmt(cont[0], 4), fmt(cont[1], 4)])
    return rows


def markdown_table(rows: list[list[str]]) -> str:
    sep = "|" + "---|" * len(rows[0]) if rows else ""
    return "\n".join([TABLE_HEADER, sep] + ["| " + " | ".join(r) + " |" for r in rows])


def load_results(run_dir: Path, servers: list[str]) -> dict[str, dict[str, DualbenchReport]]:
    out: dict[str, dict[str, DualbenchReport]] = {}
    for server in servers:
        for name, _, _ in PATTERNS:
            path = pattern_json(run_dir, server, name)
            if path.exists():
                out.setdefault(server, {})[name] = read_report(path)
    return out


def continuation_plot(server: str, results: dict[str, DualbenchReport], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"v4": "#3b6ea8", "v6": "#e08a2c"}
    names = [n for n, _, _ in PATTERNS if n in results]
    fig, ax = plt.subplots(figsize=(7.0, 3.8), dpi=110)
    width = 0.38
    for k, fam in enumerate(("v6", "v4")):
        xs, avg, lo, hi, sx, sy = [], [], [], [], [], []
        for i, name in enumerate(names):
            s = results[name].family(fam).continuation_ms
            x = i + (k - 0.5) * width
            if s.count:
                xs.append(x)
                avg.append(s.avg)
                lo.append(max(s.avg - s.p50, 0.0))
                hi.append(max(s.p90 - s.avg, 0.0))
            slide = SLIDES[name][4][0 if fam == "v6" else 1]
            if slide is not None:
                sx.append(x)
                sy.append(slide)
        ax.bar(xs, avg, width, yerr=[lo, hi], capsize=3, color=colors[fam], label=f"IPv{fam[1]} avg (ours; p50–p90)")
        ax.scatter(sx, sy, marker="D", s=26, color="black", zorder=3, label="slides (FreeBSD, 2003)" if k == 0 else None)
    ax.set_xticks(range(len(names)), [f"{n} ({a}:{b})" for n, a, b in PATTERNS if n in results])
    ax.set_xlabel("Pattern (IPv6:IPv4)")
    ax.set_ylabel("Connection continuation (ms)")
    ax.set_title(f"ANMA, {server}: continuation time per family")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


def write_report(run_dir: Path, manifest: dict) -> tuple[Path, dict[str, list[list[str]]]]:
    """report.md and plots/ from the stored pattern JSON files; returns (path, rows per server)."""
    run_dir = Path(run_dir)
    servers = list(manifest.get("servers", {}))
    results = load_results(run_dir, servers)
    cfg = manifest.get("config", {})
    lines = [f"# ANMA dual-stack benchmark (seed 004), run {run_dir.name}", "",
             f"{cfg.get('file_kib')} KiB file, {cfg.get('requests')} requests, {cfg.get('concurrency')} concurrent "
             f"connections, TIMEOUT after {cfg.get('timeout_s')} s; client `{cfg.get('client')}` → server node over "
             "the ipv6 preset's routed topology (R1 bottleneck 100 Mbit/s), no background traffic.",
             "Establishment = SYN → connected (every completed handshake); continuation = connected → last byte of "
             "the file (NORMAL requests). refused = the server answered the SYN with a RST; "
             "other = any other failure (kinds in patterns/*.json).", ""]
    rows_by_server: dict[str, list[list[str]]] = {}
    for server in servers:
        info = manifest["servers"][server]
        lines += [f"## {server} ({info.get('version', '?')})", ""]
        if info.get("error"):
            lines += [f"**failed:** {info['error']}", ""]
        rows = [table_row(name, f"{a}:{b}", results[server][name])
                for name, a, b in PATTERNS if name in results.get(server, {})]
        rows_by_server[server] = rows
        if rows:
            lines += [markdown_table(rows), ""]
            plot = continuation_plot(server, results[server], run_dir / "plots" / f"continuation-{server}.png")
            lines += [f"![continuation time, {server}](plots/{plot.name})", ""]
    lines += ["## The slides' results (FreeBSD 4.7, Pentium III 800 MHz, 2003)", "",
              markdown_table(slides_rows()), "",
              "The slides' counts for B and C (8,001/1,999, 2,001/7,999) are not exact ratios; dualbench assigns "
              "entries round-robin, so ours are exact (N·k/E).", ""]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path, rows_by_server
