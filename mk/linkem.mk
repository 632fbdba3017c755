# linkem: the binary is built and unit-tested by the Rust workspace (mk/rust.mk); its
# namespace tests (python/tests/netns/test_linkem_*.py, ~25 s) run in test-python and
# need ping (iputils-ping), iperf3, iptables with NFQUEUE, tc and ethtool.
APT_PACKAGES += iputils-ping iperf3 iptables ethtool iproute2
