"""The lab: watch collectives happen inside real training (DDP on local gloo processes)."""
