"""Checkpoints and the Hugging Face Hub.

layout (files, checksums, atomic placement; no torch) · card (config.json, README.md) ·
checkpoint (save / verify / load) · hub (push / pull) · registry (the store's artifacts rows).
"""
