# --cluster (docs/cluster.md): a benchmark of the same sweep on 1 vs 2 local Ray nodes (as root).
.PHONY: bench-cluster
bench-cluster: install
	$(PY) python/tests/netns/bench_cluster.py
