# Rust workspace: release build of every crate once, then clippy and the workspace tests.
# The fuzz crate (crates/leanweb/fuzz) is its own workspace, outside `--workspace`.
CARGO ?= cargo
RUST_CRATES := $(wildcard crates/*/Cargo.toml)
ifneq ($(RUST_CRATES),)
BUILD_TARGETS += build-rust
TEST_TARGETS += test-rust
endif

.PHONY: build-rust test-rust
build-rust:
	@$(TIMER) start rust
	$(CARGO) build --release --workspace --quiet
	@$(TIMER) end rust

test-rust: build-rust
	@$(TIMER) start rust
	@$(CARGO) clippy --version >/dev/null 2>&1 || rustup component add clippy
	$(CARGO) clippy --workspace --release --quiet -- -D warnings  # docs/testing.md
	$(CARGO) test --release --workspace --quiet
	@$(TIMER) end rust
