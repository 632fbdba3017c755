"""The makespan planner: wall time on N nodes from finished runs' unit times (docs/cluster-planning.md)."""
