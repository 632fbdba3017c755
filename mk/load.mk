# The suite under synthetic CPU load: two busy processes (stress-ng --cpu 2) for as long as
# `make test` runs; it must pass as without them (docs/testing.md).
APT_PACKAGES += stress-ng

.PHONY: test-under-load
test-under-load: apt
	@stress-ng --cpu 2 --quiet & load=$$!; \
	trap 'kill $$load 2>/dev/null; wait $$load 2>/dev/null' EXIT; \
	$(MAKE) --no-print-directory test
