"""Device figures for the roofline: memory capacity, HBM bandwidth, dense bf16 tensor-core peak.

Units are SI where the vendor quotes SI: bandwidth in bytes/s (1 TB/s = 1e12 B/s), peak in FLOP/s
(1 TFLOP/s = 1e12). Memory is an exact byte count: what NVML reports as the device total, because
the datasheet's round "80 GB" / "141 GB" is really a binary-ish capacity about 7 % larger than
80e9 / 141e9 bytes (GB and GiB mixed by the vendor; see docs/costmodel.md).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from fsc.errors import UsageError

MiB = 2**20


def host_free_bytes() -> int:
    """MemAvailable of this machine in bytes (no limit known: a very large number)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 2**63


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator as the cost model sees it.

    memory_bytes: device memory in bytes; bandwidth_bytes_per_s: HBM bandwidth in bytes/s;
    peak_flops: dense matrix peak in FLOP/s for the recipe's dtype (bf16/fp16 tensor cores).
    """

    name: str
    memory_bytes: int
    bandwidth_bytes_per_s: float
    peak_flops: float

    def to_dict(self) -> dict:
        return asdict(self)


DEVICES: dict[str, DeviceSpec] = {
    # H100 SXM5 80 GB. Bandwidth 3.35 TB/s and BF16 tensor core 1,979 TFLOP/s *with 2:4 sparsity*
    # (dense is half: 989.4) -- NVIDIA H100 Tensor Core GPU datasheet (SXM column).
    # Memory: NVML reports 81,559 MiB (79.65 GiB, 85.52 GB) for the "80 GB" part
    # (nvidia-smi; table in thundergolfer.com/blog/nvidia-gpu-memory-capacity).
    "h100": DeviceSpec("H100 SXM", 81_559 * MiB, 3.35e12, 989e12),
    # H200 SXM 141 GB. HBM3e 4.8 TB/s; BF16 tensor core 1,979 TFLOP/s with sparsity, 989 dense
    # (same Hopper die as H100) -- NVIDIA H200 Tensor Core GPU datasheet.
    # Memory: NVML reports 143,771 MiB (140.40 GiB, 150.75 GB) for the "141 GB" part (same source).
    "h200": DeviceSpec("H200", 143_771 * MiB, 4.8e12, 989e12),
    # A100 SXM4 80 GB. HBM2e 2,039 GB/s (SXM; the PCIe card is 1,935 GB/s); BF16 tensor core
    # 312 TFLOP/s dense (624 with sparsity) -- NVIDIA A100 Tensor Core GPU datasheet.
    # Memory: NVML reports 81,920 MiB (exactly 80 GiB, 85.90 GB) (same source as above).
    "a100": DeviceSpec("A100 80GB", 81_920 * MiB, 2.039e12, 312e12),
}

# CUDA device names (torch.cuda.get_device_name) of other parts of the same family: PCIe and NVL
# cards and the 40 GB A100 have other bandwidth or capacity, so they must not match an entry.
_OTHER_PARTS = ("pcie", "nvl", "40gb")


def _other_part(name: str) -> bool:
    """Whether a device name is a PCIe, NVL or 40 GB part of a family in the table."""
    key = name.lower().replace(" ", "").replace("-", "")
    return any(part in key for part in _OTHER_PARTS)


def device_spec(name: str) -> DeviceSpec | None:
    """The table entry for a short name ("h100") or a CUDA device name ("NVIDIA H100 80GB HBM3").

    Case-insensitive; None when the device is not in the table. PCIe, NVL and 40 GB parts have
    other figures, so "NVIDIA H100 PCIe" returns None rather than the SXM part's numbers.
    """
    key = name.strip().lower()
    if key in DEVICES:
        return DEVICES[key]
    if _other_part(key):
        return None
    # a short name counts only as a whole word of the name: "h1000" is not an H100
    found = [short for short in DEVICES if re.search(rf"(?<![a-z0-9]){short}(?![a-z0-9])", key)]
    return DEVICES[found[0]] if len(found) == 1 else None


def _positive(flag: str, value: float, unit: str) -> float:
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} must be a positive number of {unit} (got {value})")
    return value


def resolve_device(gpu: str | DeviceSpec, bandwidth_tb_s: float | None = None,
                   tflops: float | None = None, memory_gb: float | None = None) -> DeviceSpec:
    """A DeviceSpec from a table name or spec, with any figure overridden.

    bandwidth_tb_s in TB/s (1e12 B/s), tflops in TFLOP/s (1e12), memory_gb in GB (1e9 B).
    An unknown name is accepted only when all three figures are given.
    """
    if bandwidth_tb_s is not None:
        _positive("--bandwidth", bandwidth_tb_s, "TB/s")
    if tflops is not None:
        _positive("--tflops", tflops, "TFLOP/s")
    if memory_gb is not None:
        _positive("--memory", memory_gb, "GB")
    if isinstance(gpu, DeviceSpec):
        spec = gpu
    else:
        spec = device_spec(gpu)
        if spec is None:
            missing = [flag for flag, v in (("--bandwidth", bandwidth_tb_s), ("--tflops", tflops),
                                            ("--memory", memory_gb)) if v is None]
            if missing:
                known = ", ".join(DEVICES)
                part = (" (a PCIe, NVL or 40 GB part has other figures than the table's)"
                        if _other_part(gpu) else "")
                given = ("give --bandwidth, --tflops and --memory" if len(missing) == 3 else
                         f"give {' and '.join(missing)} too")
                raise UsageError(f"unknown GPU {gpu!r}{part}; known: {known}; for another "
                                 f"device {given}")
            spec = DeviceSpec(gpu, 0, 0.0, 0.0)
    return DeviceSpec(
        spec.name,
        spec.memory_bytes if memory_gb is None else round(memory_gb * 1e9),
        spec.bandwidth_bytes_per_s if bandwidth_tb_s is None else bandwidth_tb_s * 1e12,
        spec.peak_flops if tflops is None else tflops * 1e12,
    )
