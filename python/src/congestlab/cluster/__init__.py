"""Optional: a study's units of points as Ray tasks, one testbed per node, gathered into
one run directory on the head (docs/cluster.md). Nothing here imports Ray at module level:
only `--cluster` loads congestlab.cluster.driver, which does."""
