# tcp-lab (`congestlab reproduce tcp-lab`, seed 003): iperf 2 (Debian `iperf`, the study's tool),
# ping for the fidelity checks, stdbuf (coreutils) to line-buffer iperf's CSV, ss (iproute2),
# tc for HTB/TBF and linkem (built by mk/rust.mk) for delay/loss. Its tests
# (python/tests/netns/test_tcplab_netns.py ~40 s, python/tests/unit/test_tcplab_*.py) run in test-python.
APT_PACKAGES += iperf iputils-ping coreutils iproute2 iptables
