"""Linear attention with a feature map and a floored normaliser."""
