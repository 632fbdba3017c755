# leanweb: a short cargo-fuzz run of the frame-input path (nightly), beside the workspace tests.
# The netns tests (python/tests/netns/test_leanweb_netns.py) run with the other pytest suites
# as root; they need the release binary that build-rust makes.
#
# Fuzzing: corpus/ (gitignored) collects what the fuzzer finds, seeds/ holds handshake+GET
# records to start from. The stack is safe Rust, so no sanitizer (faster to build and run);
# debug assertions are on, so an arithmetic overflow on untrusted input is a finding too.
LEANWEB_FUZZ_SECONDS ?= 20
LEANWEB_FUZZ_DIR := crates/leanweb/fuzz
APT_PACKAGES += wrk
TEST_TARGETS += test-leanweb-fuzz

.PHONY: test-leanweb-fuzz bench-leanweb bench-lean-loss
test-leanweb-fuzz:
	@command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@mkdir -p $(LEANWEB_FUZZ_DIR)/corpus/frame_input
	cd $(LEANWEB_FUZZ_DIR) && cargo +nightly fuzz run --sanitizer none --debug-assertions \
		frame_input corpus/frame_input seeds/frame_input -- \
		-max_total_time=$(LEANWEB_FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=1024 -print_final_stats=1

# Not part of `make test` (root, ~1 min): req/s and Mbit/s of leanweb, Apache and nginx on an
# unshaped namespace path, and the 320 KiB delay through a 100 Mbit/s bottleneck, leanweb vs Apache.
bench-leanweb: install
	$(PY) python/benchmarks/bench_leanweb.py

# Not part of `make test` (root, ~3-5 min): 320 KiB with 5 % random loss toward the client,
# leanweb --profile modern vs nginx (kernel TCP, CUBIC) vs --profile bare; medians and ratios.
bench-lean-loss: install
	$(PY) python/benchmarks/bench_lean_loss.py
