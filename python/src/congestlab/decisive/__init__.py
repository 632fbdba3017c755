"""Repetitions until decisive (`run`/`reproduce --until-decisive`): the sequential procedure over a
run's claims (procedure.py), what it needs of the claims (claims.py) and its driver on a testbed
(driver.py). docs/statistics.md, "Repetitions until decisive"."""
