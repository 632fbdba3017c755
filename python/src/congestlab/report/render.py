"""Jinja2 templates (package data in report/templates/) for report.md, report.html and the
comparison pages; HTML is autoescaped, Markdown escapes table pipes."""

from __future__ import annotations

from functools import lru_cache

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape


def md_cell(value) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(value).split()).replace("|", "\\|")


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(loader=PackageLoader("congestlab.report", "templates"),
                      autoescape=select_autoescape(enabled_extensions=("html.j2",), default=False),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["md"] = md_cell
    return env


def render_template(name: str, context: dict) -> str:
    return environment().get_template(name).render(**context)
