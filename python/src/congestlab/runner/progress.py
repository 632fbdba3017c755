"""The progress bar of a run: one step per (point, repetition), with elapsed time and eta."""

from __future__ import annotations

from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


@contextmanager
def run_progress(console: Console, title: str, total: int):
    """Yields `step(description)` to name the run starting now and `advance()` once it is done."""
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(title, total=total)
        yield (lambda description: progress.update(task, description=description)), (lambda: progress.advance(task))
