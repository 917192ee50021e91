"""Where a trial's roles run: one protocol (sites/base.py), two sites (local namespaces, hosts over SSH)."""
