"""Pure functions: pcap -> per-connection records -> metrics as the studies define them."""
