"""What every Triton launcher shares: device checks, buffer allocation, tile heuristics.

Kernels index with int64 (program ids, and aranges outside hot loops, cast once): offsets of a
B = 8, 256k-token cache pass 2^31, and the interpreter then skips its per-operation int32
overflow check, which costs more than the arithmetic itself.

Launchers run on CUDA tensors, or on CPU tensors under the Triton interpreter
(`TRITON_INTERPRET=1`, set before any kernel module is imported). Kernels take a constexpr
`UPCAST` from `upcast()`: under the interpreter every load is cast to fp32 at once (its bf16
arithmetic is wrong); on the GPU 16-bit `tl.dot` operands stay 16-bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os

import torch
import triton
from fsc.kernels import TUNING_ENV, op_folders

from fsc.errors import KernelError, TuningError

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
MAX_G = 128  # kernels that hold the whole block in one register tile accept up to this G

# Tests set this to True: every buffer a launcher allocates then starts as NaN, so an element a
# kernel forgets to write shows up in the comparison instead of passing by luck.
POISON = False


def interpreting() -> bool:
    knobs = getattr(triton, "knobs", None)
    if knobs is not None and getattr(knobs.runtime, "interpret", False):
        return True
    return os.environ.get("TRITON_INTERPRET") == "1"


def upcast() -> bool:
    return interpreting()


def check(op: str, tensors: dict[str, torch.Tensor | None], dtypes=DTYPES) -> torch.device:
    """One device for all tensors, CUDA or the interpreter on CPU, floating dtypes we support."""
    present = {k: t for k, t in tensors.items() if t is not None}
    devices = {t.device for t in present.values()}
    if len(devices) != 1:
        raise KernelError(f"{op}: tensors on several devices: {sorted(map(str, devices))}")
    device = devices.pop()
    if device.type != "cuda" and not interpreting():
        raise KernelError(f"{op}: the Triton kernel needs CUDA tensors (or TRITON_INTERPRET=1), "
                          f"got {device.type}")
    for name, t in present.items():
        if t.dtype not in dtypes:
            raise KernelError(f"{op}: {name} has dtype {t.dtype}; supported: "
                              f"{', '.join(str(d) for d in dtypes)}")
    return device


def check_block(op: str, G: int) -> None:
    if G > MAX_G:
        raise KernelError(f"{op}: a block of G = {G} tokens exceeds the {MAX_G} this kernel holds")


def expect_shape(op: str, name: str, t: torch.Tensor | None, shape: tuple[int, ...]) -> None:
    if t is not None and tuple(t.shape) != tuple(shape):
        raise KernelError(f"{op}: {name} has shape {tuple(t.shape)}, expected {tuple(shape)}")


def empty(shape, dtype, device) -> torch.Tensor:
    t = torch.empty(shape, dtype=dtype, device=device)
    if POISON:
        t.fill_(float("nan"))
    return t


def aliases(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    """True when two tensors may share memory (then a kernel must not read one after writing)."""
    if a is None or b is None or a.numel() == 0 or b.numel() == 0:
        return False
    a0, a1 = a.data_ptr(), a.data_ptr() + _span(a)
    b0, b1 = b.data_ptr(), b.data_ptr() + _span(b)
    return a0 < b1 and b0 < a1


def _span(t: torch.Tensor) -> int:
    return (sum((s - 1) * st for s, st in zip(t.shape, t.stride())) + 1) * t.element_size()


def device_guard(device: torch.device):
    """Launch on the tensors' GPU; nothing (and no torch.cuda call) for CPU tensors."""
    if device.type == "cuda":
        return torch.cuda.device(device)
    return contextlib.nullcontext()


@functools.cache
def _cuda_sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """Streaming multiprocessors to fill; a small stand-in under the interpreter keeps grids
    (and test times) small while still splitting work across several programs."""
    if device.type == "cuda":
        return _cuda_sm_count(device.index if device.index is not None else torch.cuda.current_device())
    return 4


def pow2(n: int, lo: int = 16) -> int:
    """The smallest power of two >= max(n, lo): tile sizes (tl.dot wants >= 16)."""
    return max(lo, triton.next_power_of_2(max(int(n), 1)))


def dot_precision(activations: torch.dtype) -> str:
    """input_precision of the fp32 `tl.dot`s of a kernel whose activations are `activations`.

    fp32 models get 3×TF32 (about fp32 accuracy on tensor cores; an exact "ieee" dot runs on
    FMA units and spills registers at K = 128). 16-bit models get one TF32 pass: its 2^-11
    relative rounding is below the 2^-8 of their bf16 outputs. 16-bit operands ignore it.
    The interpreter computes every dot exactly in fp32.
    """
    return "tf32x3" if activations == torch.float32 else "tf32"


def warps(tile_elements: int) -> int:
    """4 warps; 8 once the largest fp32 register tile reaches 4096 elements (32 a thread)."""
    return 8 if tile_elements >= 4096 else 4


# -- launch choices ---------------------------------------------------------------------------
KERNELS = tuple(op_folders().values())  # the kernels $FSC_KERNEL_TUNING may name
FORMS = ("auto", "chunk", "scan")


def _kernel(t) -> str:
    """The kernel a Tuning belongs to: "gla" for fsc.kernels.gla.triton.Tuning."""
    return type(t).__module__.rsplit(".", 2)[-2]


@dataclasses.dataclass(frozen=True)
class Choices:
    """Base of each kernel module's `Tuning`: checked on creation, so neither
    $FSC_KERNEL_TUNING nor `tuned()` can ask for a launch the kernel cannot make."""

    def __post_init__(self):
        check_tuning(self)


def check_tuning(t) -> None:
    """Refuse a `Tuning` value its kernel cannot launch with: tiles powers of two from the
    class's LEAST_BLOCK to 1024, 1-16 warps, 1-8 stages, positive counts."""
    name = _kernel(t)
    for f in dataclasses.fields(t):
        v = getattr(t, f.name)
        if v is None and "None" in str(f.type):
            continue
        if f.name == "form":
            ok, want = v in FORMS, " or ".join(FORMS)
        elif not isinstance(v, int) or isinstance(v, bool):
            ok, want = False, "an integer"
        elif f.name.startswith("block_"):
            least = getattr(t, "LEAST_BLOCK", 16)
            ok, want = least <= v <= 1024 and v & (v - 1) == 0, f"a power of two {least}..1024"
        elif f.name == "num_warps":
            ok, want = v in (1, 2, 4, 8, 16), "1, 2, 4, 8 or 16"
        elif f.name == "num_stages":
            ok, want = 1 <= v <= 8, "1..8"
        else:
            ok, want = v >= 1, "a positive integer"
        if not ok:
            raise TuningError(f"{name}.{f.name}={v!r} is not valid: want {want}")


def from_env(name: str, defaults):
    """`defaults` with the choices $FSC_KERNEL_TUNING gives kernel `name`.

    The variable is a comma-separated list of `kernel.choice=value` (value `none` for the
    heuristic where a choice has one), as `tools.gpucheck` prints for the fastest choices it found.
    """
    raw = os.environ.get(TUNING_ENV, "")
    changes = {}
    for item in filter(None, (x.strip() for x in raw.split(","))):
        key, eq, value = item.partition("=")
        kernel, dot, field = key.strip().partition(".")
        if not eq or not dot or not value.strip():
            raise TuningError(f"{TUNING_ENV}: {item!r} is not kernel.choice=value "
                              "(e.g. attention.block_n=128)")
        if kernel not in KERNELS:
            raise TuningError(f"{TUNING_ENV}: unknown kernel {kernel!r}; kernels: {', '.join(KERNELS)}")
        if kernel == name:
            value = value.strip()
            changes[field] = (None if value.lower() == "none" else
                              int(value) if value.lstrip("-").isdigit() else value)
    return _replace(defaults, changes, f"{TUNING_ENV}: ")


def _replace(t, changes: dict, where: str = ""):
    known = [f.name for f in dataclasses.fields(t)]
    for field in changes:
        if field not in known:
            raise TuningError(f"{where}{_kernel(t)} has no choice {field!r}; "
                              f"choices: {', '.join(known)}")
    try:
        return dataclasses.replace(t, **changes)
    except TuningError as e:
        raise TuningError(f"{where}{e}") from None


@contextlib.contextmanager
def tuned(module, **changes):
    """Run the enclosed launches of `module` (a kernel's triton.py) with some fields of its
    `TUNING` (launch choices: tile sizes, warps) changed, as `tools.gpucheck` does to try them."""
    before = module.TUNING
    module.TUNING = _replace(before, changes)
    try:
        yield module.TUNING
    finally:
        module.TUNING = before


def narrow(width: int, floor: int, programs, sms: int) -> int:
    """Halve a tile `width` (down to `floor`) while `programs(width)`, the grid it gives, has
    fewer than two programs an SM: at small batch, more and narrower programs fill the GPU."""
    while width > floor and programs(width) < 2 * sms:
        width //= 2
    return width


def width(n: int, chosen: int | None, B: int, H: int, device: torch.device, widest: int = 32,
          least: int = 16) -> int:
    """Columns of `n` a program of a (B, H, n tiles) grid takes: `chosen` (a `Tuning`'s) within
    n's power of two, or `widest`, narrowed down to `least` as `narrow` says."""
    if chosen is not None:
        return min(pow2(n), chosen)
    return narrow(min(pow2(n), widest), least, lambda w: B * H * cdiv(n, w), sm_count(device))


def strides(*tensors: torch.Tensor) -> tuple[int, ...]:
    """Every stride of each tensor in turn: a kernel's stride arguments, in its order."""
    return tuple(s for t in tensors for s in t.stride())


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
