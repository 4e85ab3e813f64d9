"""Step traces of a Schedule: as data (for --json and exporters) and as terminal tables."""
