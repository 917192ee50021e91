"""Tunnel adapters: declarative TOML files run by one generic runner (adapter.py)."""
