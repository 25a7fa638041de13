"""Checkpoints and the Hugging Face Hub."""
