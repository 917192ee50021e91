"""Traffic generators. Each has a pure argv() and a pure parse() (tested on committed outputs)."""
