# dualbench (crates/dualbench) builds and tests with the workspace (mk/rust.mk) and its
# Python side with pytest. wrk is only for python/benchmarks/bench_dualbench.py.
APT_PACKAGES += wrk
