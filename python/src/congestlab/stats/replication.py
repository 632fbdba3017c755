"""A seed's range as a replication target: its own error allowed for (docs/statistics.md,
"Replication: the seed's own error").

The seeds publish means of a few runs ("three repeated stable runs", "repeated ten times") and
no spread. A range built from such means (the smallest to the largest the seed reports, or its
words' numbers) is not exact: each end carries the error of a mean of n_seed runs. A correct
replication whose truth sits just beyond the seed's range is consistent with the seed's data,
and a check that treats the range as exact would call it "does not hold".

So, after Patil, Peng & Leek (2016, "What should researchers expect when they replicate
studies?") and Spence & Stanley (2016, "Prediction interval: what to expect when you're
wrong"), the seed's estimate is given the error of a mean of n_seed runs, with our own
between-repetition spread `sd` standing in for the seed's unpublished one:

    se_seed = sd / sqrt(n_seed)

- **does not hold** when our estimate lies outside the replication prediction interval of the
  range's nearer end: (est - lo) / sqrt(se^2 + se_seed^2) or (hi - est) / sqrt(...) below the
  Student-t quantile (our df): the two studies' errors together cannot explain the gap.
- **holds** when our CI lies inside the range widened by the seed's own 95 % error,
  [lo - q se_seed, hi + q se_seed], q the two-sided 95 % t quantile (our df): two one-sided tests
  as for any range (TOST). The widening is fixed at 95 % (not at a look's level), so both
  p-values are those of fixed hypotheses and Holm and the sequential levels apply to them.

A seed that does not say how many runs a number averages (`UNKNOWN`) is taken as one run: the
widest interval a published number of unknown provenance can honestly carry.
"""

from __future__ import annotations

import math

from scipy import stats as st

UNKNOWN = "unknown"
UNKNOWN_RUNS = 1  # a number without its n: one run's error
WIDEN_LEVEL = 0.95  # the seed's error band added to a range on the "holds" side


def seed_runs(seed_n: int | str) -> int:
    """The seed's n as a number of runs (UNKNOWN: one)."""
    return UNKNOWN_RUNS if seed_n == UNKNOWN else int(seed_n)


def seed_se(sd: float, seed_n: int | str) -> float:
    """The standard error of the seed's mean of n runs, our between-repetition spread standing in."""
    return sd / math.sqrt(seed_runs(seed_n))


def widened(lo: float, hi: float, sd: float, df: int, seed_n: int | str) -> tuple[float, float]:
    """The range with the seed's own 95 % error added at each end (on the effect's scale)."""
    q = float(st.t.ppf(0.5 + WIDEN_LEVEL / 2, max(df, 1))) * seed_se(sd, seed_n)
    return lo - q, hi + q


def range_p_values(estimate: float, se: float, df: int, lo: float, hi: float, sd: float,
                   seed_n: int | str) -> tuple[float, float, tuple[float, float]]:
    """(p_holds, p_fails, the widened range) of "our effect lies in the seed's [lo, hi]", the
    seed's error allowed for (module docstring). p_holds: TOST against the widened range with
    our own standard error; p_fails: our estimate outside the replication prediction interval
    of the nearer end."""
    wlo, whi = widened(lo, hi, sd, df, seed_n)
    t = st.t
    p_holds = max(float(t.sf((estimate - wlo) / se, df)), float(t.cdf((estimate - whi) / se, df)))
    combined = math.sqrt(se ** 2 + seed_se(sd, seed_n) ** 2)
    p_fails = min(float(t.cdf((estimate - lo) / combined, df)), float(t.sf((estimate - hi) / combined, df)))
    return p_holds, p_fails, (wlo, whi)
