"""What a validation may take as given (pydantic's validation context), set by whoever knows it."""

# every value of the data was checked finite already. A sweep's point (spec/sweep.py) holds its
# study's values (axes, levels, `set`) and defaults only; its study was checked as read, and the
# walk over every point's published numbers was most of a sweep's time.
VALUES_CHECKED = "values_checked"
# a spec read back from a run directory (congestlab.stored): every field was dumped, so the
# checks of which fields a user wrote (pydantic's model_fields_set) do not apply; the spec
# passed them when it ran.
STORED = "stored"


def stored(info) -> bool:
    """Whether a validation (a validator's ValidationInfo) reads a stored spec back."""
    return bool((info.context or {}).get(STORED))
