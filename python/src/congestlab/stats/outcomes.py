"""The outcome of one measured sample, as results/request.csv's `outcome` column writes it
(docs/data-format.md, "Request outcomes"; analysis/request_outcome.py decides it for a GET):
`complete` (the value is measured), `timed_out` (censored at its limit, known only to lie
beyond it), `invalid` (excluded, only counted). Defined here, at the bottom of the layers, so
that the engine, the spec, the analysis and the report all read the same three words.
"""

COMPLETE, TIMED_OUT, INVALID = "complete", "timed_out", "invalid"
OUTCOMES = (COMPLETE, TIMED_OUT, INVALID)
