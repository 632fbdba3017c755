# tcp-lab (`congestlab reproduce tcp-lab`, seed 003; spec/presets/tcp-lab.toml) and cc-share:
# iperf 2 (Debian `iperf`, the study's tool) and iperf3, ping for the fidelity checks, stdbuf
# (coreutils) to line-buffer iperf's CSV, ss (iproute2), tc for HTB/TBF and linkem (built by
# mk/rust.mk) for delay/loss. Their tests (python/tests/netns/test_tcplab_netns.py,
# test_cc_share_netns.py, test_testbed_reconfigure_netns.py; unit/test_workloads_iperf_ping.py,
# unit/test_presets_tcplab_ccshare.py) run in test-python.
APT_PACKAGES += iperf iperf3 iputils-ping coreutils iproute2 iptables
