"""Multi-host runs: roles placed on machines reached over SSH (docs/multi-host.md)."""
