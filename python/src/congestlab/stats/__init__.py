"""Censored statistics, verdict rules and the sequential design (docs/statistics.md).

The bottom layer beside errors: it imports nothing else of congestlab, takes plain data (cells
of samples with an outcome and a block each) and returns plain dataclasses the report renders.
"""
