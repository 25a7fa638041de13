"""fsc: build, decode, profile and share fixed-state and attention language models."""

__version__ = "0.1.0"
