# The LD_PRELOAD shim that lets Debian's MGEN 5.02b open IPv6 sockets on glibc >= 2.26.
APT_PACKAGES += mgen gcc libc6-dev
BUILD_TARGETS += build-mgen-shim
MGEN_SHIM := target/mgen/libmgen_ipv6_shim.so

.PHONY: build-mgen-shim
build-mgen-shim: $(MGEN_SHIM)
$(MGEN_SHIM): python/src/congestlab/traffic/mgen_ipv6_shim.c
	@$(TIMER) start setup
	@mkdir -p $(dir $@)
	gcc -shared -fPIC -O2 -Wall -o $@ $<
	@$(TIMER) end setup
