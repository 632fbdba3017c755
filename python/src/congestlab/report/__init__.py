"""Tables, plots and a page, made only from a stored run directory (no root needed)."""

from congestlab.report.build import build_report  # noqa: F401
