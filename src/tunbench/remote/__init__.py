"""Multi-host runs: the inventory of remote hosts, and how tunbench reaches them over SSH."""
