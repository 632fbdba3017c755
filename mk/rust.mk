# Rust workspace: release build of every crate once, then the workspace tests.
CARGO ?= cargo
RUST_CRATES := $(wildcard crates/*/Cargo.toml)
ifneq ($(RUST_CRATES),)
BUILD_TARGETS += build-rust
TEST_TARGETS += test-rust
endif

.PHONY: build-rust test-rust
build-rust:
	$(CARGO) build --release --workspace --quiet

test-rust: build-rust
	$(CARGO) test --release --workspace --quiet
