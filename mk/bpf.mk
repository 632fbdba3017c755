# Compound TCP (BPF struct_ops): object + fixed-point harness, and the sampler bpf/build/clprobe
# (docs/probes.md: a libbpf skeleton linked against libbpf, libelf, zlib); kernel headers come
# from the running kernel's BTF (bpftool), so no linux-headers package is needed.
APT_PACKAGES += clang llvm libbpf-dev libelf-dev zlib1g-dev bpftool linux-libc-dev gcc make
BUILD_TARGETS += build-bpf
TEST_TARGETS += test-bpf

.PHONY: build-bpf test-bpf
build-bpf:
	@$(TIMER) start bpf
	$(MAKE) -C bpf --no-print-directory all
	@$(TIMER) end bpf

# Fixed-point harness; the struct_ops/netns checks run with pytest (python/tests/netns/test_cc_*.py).
test-bpf: build-bpf
	@$(TIMER) start bpf
	$(MAKE) -C bpf --no-print-directory test
	@$(TIMER) end bpf
