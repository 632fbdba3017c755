"""A built report on the terminal: its console tables, warnings and where its files are."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def print_report(report, console: Console) -> None:
    # a pipe or file gets 80 columns, which squeezes wide tables (anma's 18 columns) to "…"
    tables = console if console.is_terminal else Console(width=200)
    for title, (header, rows) in report.console.items():
        table = Table(title=title)
        for col in header:
            table.add_column(col, justify="right")
        for row in rows:
            table.add_row(*row)
        tables.print(table)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {warning}")
    console.print(f"report: {report.markdown_path}  (also {report.html_path.name}, plots/)")
