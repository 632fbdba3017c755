"""Servers under test: generated per-run configs, start, ready-check, stop."""
