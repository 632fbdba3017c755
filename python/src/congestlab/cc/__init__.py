"""Congestion controls for kernel-TCP servers: built-in ones and Compound TCP (BPF struct_ops)."""
