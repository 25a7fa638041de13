"""Test-wide setup. The Triton interpreter switch is read when kernels are decorated, so it is
set here, before anything imports fsc.kernels."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.pop("FSC_KERNEL_TUNING", None)  # tests see the kernels' own defaults
os.environ.setdefault("FSC_STORE", os.path.join(os.path.dirname(__file__), ".store-unused"))

import torch

torch.set_num_threads(1)  # see fsc.cli.common.torch_threads
