"""tcp-lab: the TCP-performance lab study (seed 003) with iperf 2 on namespaces."""
