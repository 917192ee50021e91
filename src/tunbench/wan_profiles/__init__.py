"""WAN profiles: named link conditions (TOML files). `lan` is a plain veth pair; every other profile
runs the tunbench-link emulator with per-direction impairments."""
