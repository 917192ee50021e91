"""Tunnel adapters: declarative TOML files (read by adapter.py) run by one generic runner (tunnel.py's Tunnel)."""
