# leanweb: a short cargo-fuzz run of the frame-input path (nightly), beside the workspace tests.
# The netns tests (python/tests/netns/test_leanweb_netns.py) run with the other pytest suites
# as root; they need the release binary that build-rust makes.
#
# Fuzzing: corpus/ (gitignored) collects what the fuzzer finds, seeds/ holds handshake+GET
# records to start from, corpus-min/ (in the repo) the minimised corpus of the last
# `make fuzz-long`. The stack is safe Rust, so no sanitizer (faster to build and run);
# debug assertions are on, so an arithmetic overflow on untrusted input is a finding too.
LEANWEB_FUZZ_SECONDS ?= 20
LEANWEB_FUZZ_DIR := crates/leanweb/fuzz
APT_PACKAGES += wrk
TEST_TARGETS += test-leanweb-fuzz

.PHONY: lean-knobs-json test-leanweb-fuzz fuzz-long bench-leanweb bench-lean-loss bench-lean-fairness bench-lean-fairness-steady bench-lean-frame-cost
# The lean knobs' table for the Python side, from the one declaration in crates/leanweb/src/knobs.rs;
# python/tests/unit/test_lean_knobs_json.py fails until the regenerated copy is committed.
lean-knobs-json:
	cargo build --release -p leanweb
	target/release/leanweb --knobs-json > python/src/congestlab/spec/lean_knobs.json

test-leanweb-fuzz:
	@$(TIMER) start fuzz
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@mkdir -p $(LEANWEB_FUZZ_DIR)/corpus/frame_input $(LEANWEB_FUZZ_DIR)/corpus-min/frame_input
	cd $(LEANWEB_FUZZ_DIR) && cargo +nightly fuzz run --sanitizer none --debug-assertions \
		frame_input corpus/frame_input seeds/frame_input corpus-min/frame_input -- \
		-max_total_time=$(LEANWEB_FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=1024 -print_final_stats=1
	@$(TIMER) end fuzz

# Not part of `make test` (root, ~1 min): req/s and Mbit/s of leanweb, Apache and nginx on an
# unshaped namespace path, and the 320 KiB delay through a 100 Mbit/s bottleneck, leanweb vs Apache.
bench-leanweb: install
	$(PY) python/benchmarks/bench_leanweb.py

# Not part of `make test` (root, ~3-5 min): 320 KiB with 5 % random loss toward the client,
# leanweb --profile modern vs nginx (kernel TCP, CUBIC) vs --profile bare; medians and ratios.
bench-lean-loss: install
	$(PY) python/benchmarks/bench_lean_loss.py

# Not part of `make test` (root, ~1 min): loss-free 320 KiB fetches, leanweb modern vs nginx,
# and leanweb's CPU per fetch; add ARGS="--perf FILE" for a profile.
bench-lean-frame-cost: install
	$(PY) python/benchmarks/bench_lean_frame_cost.py $(ARGS)

# Not part of `make test` (root, ~14 min): leantcp's congestion controls sharing the 100 Mbit/s
# bottleneck: modern vs modern, modern vs kernel CUBIC, Compound vs kernel Compound (BPF), and
# references (kernel vs kernel, no cwnd, no HyStart++, a fixed send buffer, one lean flow alone).
bench-lean-fairness: install
	$(PY) python/benchmarks/bench_lean_fairness.py

# Not part of `make test` (root, ~65 min): the share goals past the start-up, as measured in
# docs/notes/leantcp-congestion-control.md part C: the CUBIC pairings over 120 s (share from
# 40 s on), the Compound pairings over 300 s (from 120 s on; Reno-like growth evens out slowly).
bench-lean-fairness-steady: install
	$(PY) python/benchmarks/bench_lean_fairness.py --seconds 120 --pairings modern-modern,modern-cubic,cubic-cubic
	$(PY) python/benchmarks/bench_lean_fairness.py --seconds 300 --settle-s 120 --pairings compound-compound,kcompound-kcompound


# Not part of `make test`: every fuzz target (or FUZZ_TARGETS) for FUZZ_SECONDS each (or until
# FUZZ_RUNS inputs, whichever comes first; -1 = no count limit), one after the other, starting
# from seeds/ and corpus-min/; then `cargo fuzz cmin` and the minimised corpus replaces
# corpus-min/<target> (commit it). libFuzzer's final stats (number_of_executed_units = inputs
# run) go to target/fuzz-long/<target>.log, and a summary line each. A crash stops the run:
# the input is in artifacts/<target>/.
FUZZ_SECONDS ?= 3600
FUZZ_RUNS ?= -1
FUZZ_TARGETS ?= $(shell cd $(LEANWEB_FUZZ_DIR) && cargo +nightly fuzz list 2>/dev/null)
FUZZ_FLAGS := --sanitizer none --debug-assertions
fuzz-long:
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	cd $(LEANWEB_FUZZ_DIR) && mkdir -p target/fuzz-long && for t in $(FUZZ_TARGETS); do \
		mkdir -p corpus/$$t corpus-min/$$t seeds/$$t; \
		cp -n corpus-min/$$t/* corpus/$$t/ 2>/dev/null || true; \
		echo "fuzz-long: $$t for $(FUZZ_SECONDS) s"; \
		cargo +nightly fuzz run $(FUZZ_FLAGS) $$t corpus/$$t seeds/$$t -- \
			-max_total_time=$(FUZZ_SECONDS) -runs=$(FUZZ_RUNS) -max_len=4096 -rss_limit_mb=1024 -print_final_stats=1 \
			> target/fuzz-long/$$t.log 2>&1 || { tail -40 target/fuzz-long/$$t.log; exit 1; }; \
		cargo +nightly fuzz cmin $(FUZZ_FLAGS) $$t corpus/$$t -- -rss_limit_mb=1024 -max_len=4096 \
			> target/fuzz-long/$$t.cmin.log 2>&1 || { tail -20 target/fuzz-long/$$t.cmin.log; exit 1; }; \
		rm -rf corpus-min/$$t && cp -r corpus/$$t corpus-min/$$t; \
		echo "fuzz-long: $$t $$(grep -h 'stat::number_of_executed_units' target/fuzz-long/$$t.log)," \
			"$$(grep -ho 'Done [0-9]* runs in [0-9]* second(s)' target/fuzz-long/$$t.log);" \
			"$$(ls corpus-min/$$t | wc -l) inputs in corpus-min/$$t"; \
	done
