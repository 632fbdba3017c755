# Compound TCP (BPF struct_ops): object + fixed-point harness; kernel headers come
# from the running kernel's BTF (bpftool), so no linux-headers package is needed.
APT_PACKAGES += clang llvm libbpf-dev bpftool linux-libc-dev gcc make
BUILD_TARGETS += build-bpf
TEST_TARGETS += test-bpf

.PHONY: build-bpf test-bpf
build-bpf:
	$(MAKE) -C bpf --no-print-directory all

# Fixed-point harness; the struct_ops/netns checks run with pytest (python/tests/netns/test_cc_*.py).
test-bpf: build-bpf
	$(MAKE) -C bpf --no-print-directory test
