"""Packet capture at the server's port (the studies' port mirror); produces files only."""
