# traceanalyze (crates/traceanalyze): built and unit-tested with the workspace (mk/rust.mk).
# python/tests/unit/test_trace.py runs its release binary: `make test` builds it first
# (test-python needs install, which runs build). tshark brings editcap and mergecap (the
# benchmark's 10x capture); `time` is /usr/bin/time -v (the benchmark's peak RSS).
APT_PACKAGES += tshark iperf3 tcpdump time

.PHONY: bench-analyzer
# Not part of `make test` (root, 3-8 min with the load of a shared machine): traceanalyze vs the dpkt reference vs tshark on a
# >= 1-million-frame iperf3 capture over veth, then traceanalyze alone on a 10x capture.
bench-analyzer: install
	$(PY) python/benchmarks/bench_analyzer.py
