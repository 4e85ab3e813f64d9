"""Preset data: cluster and GPU presets (clusters.toml, gpus.toml), each with its sources."""
