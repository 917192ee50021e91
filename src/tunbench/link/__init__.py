"""The emulated link: WAN profiles and the tunbench-link process that applies them."""
