"""Checkpoint directories on this machine: what `fsc build --save`, `fsc train` and `fsc import`
write and every command that takes a checkpoint reads.

layout (files, checksums, atomic placement; no torch) · card (config.json, README.md) ·
io (save / verify / load) · registry (the store's artifacts rows). The Hugging Face Hub is
fsc.hub.
"""
