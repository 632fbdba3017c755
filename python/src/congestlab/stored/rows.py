"""Result rows as readers take them: every value in one spelling, so TOML 10000, CSV "10000.0"
and "1e4" select the same rows (norm), and each number parsed once (ResultRow.number)."""

from __future__ import annotations

import math


def norm(value) -> str:
    """One spelling per value: numbers as %.12g, booleans as True/False, the rest as given."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return f"{float(value):.12g}"
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    if math.isfinite(number) and text.lower() not in ("nan", "inf", "-inf", "infinity"):
        return f"{number:.12g}"
    return text


def number_of(text) -> float | None:
    """A stored value as a finite number (True/False as 1/0); None when it is not one."""
    if text is None or text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        if text in ("True", "False"):
            return 1.0 if text == "True" else 0.0
        return None
    return value if math.isfinite(value) else None


class ResultRow(dict):
    """One row of a results table: column -> its value in norm's spelling ("" when empty),
    with its numbers parsed once."""

    __slots__ = ("_numbers",)

    @classmethod
    def of(cls, row: dict) -> "ResultRow":
        out = cls({k: norm(v) if v is not None else "" for k, v in row.items()})
        out._numbers = {}
        return out

    def number(self, column: str) -> float | None:
        try:
            return self._numbers[column]
        except KeyError:
            value = self._numbers[column] = number_of(self.get(column))
            return value
