"""Suites: several studies run as one, with one index report (docs/suite.md)."""
