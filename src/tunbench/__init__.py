"""tunbench: reproducible performance testing for VPNs, tunnels and proxies."""

__version__ = "0.1.0"
