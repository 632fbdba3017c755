"""`congestlab simulate`: a study's one-bottleneck scenario run in leantcp's simulated
network (crates/leansim) and, with --compare, beside the same spec in netns (docs/simulation.md)."""
