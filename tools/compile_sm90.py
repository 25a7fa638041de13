"""Compile every kernel for sm_90 (H100/H200) with the local Triton, no GPU needed.

Run as a script in a process without TRITON_INTERPRET. The launchers run on CPU tensors with
their kernels swapped for recorders; each recorded launch is compiled by `triton.compile` down
to a cubin with the arguments the JIT would specialise on (ints equal to 1, 16-divisible ints
and pointers), and its register use is read with cuobjdump. Prints one JSON line per launch: registers, stack
(spills), shared memory, warps, the programs an SM can hold, and the 16-byte global loads in the
PTX (asynchronous copies into shared memory, which software pipelining uses, and plain ones).
"""

import json
import os
import re
import subprocess
import sys
import tempfile

import torch
import triton
from fsc.kernels import _common
from fsc.kernels.attention import triton as attn
from fsc.kernels.conv import triton as conv
from fsc.kernels.gated_delta import triton as gated_delta
from fsc.kernels.gla import triton as gla
from fsc.kernels.linear import triton as lin
from fsc.kernels.mamba import triton as mamba
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

PTR = {torch.bfloat16: "*bf16", torch.float16: "*fp16", torch.float32: "*fp32"}
CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


class Recorder:
    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((args, kwargs))


def specialise(fn, args, kwargs):
    params = {p.name: p for p in fn.params}
    names = [n for n in fn.arg_names if not params[n].is_constexpr]
    assert len(names) == len(args), (fn.__name__, len(names), len(args))
    signature, constants, attrs = {}, {}, {}
    options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
    for name, a in zip(names, args):
        index = (fn.arg_names.index(name),)
        if isinstance(a, torch.Tensor):
            signature[name] = PTR[a.dtype]
            aligned = a.data_ptr() % 16 == 0
        elif isinstance(a, bool):
            signature[name], aligned = "i1", False
        elif isinstance(a, int) and a == 1:
            signature[name], constants[name], aligned = "constexpr", 1, False
        elif isinstance(a, int):
            signature[name] = "i32" if -(2**31) <= a < 2**31 else "i64"
            aligned = a % 16 == 0
        else:
            signature[name], aligned = "fp32", False
        if aligned:
            attrs[index] = [["tt.divisibility", 16]]
    for name, v in kwargs.items():
        signature[name], constants[name] = "constexpr", v
    return ASTSource(fn, signature, constants, attrs), options


def compile_launches(label, module, names, call):
    recorders = {n: Recorder(getattr(module, n)) for n in names}
    for n, rec in recorders.items():
        setattr(module, n, rec)
    try:
        call()
    finally:
        for n, rec in recorders.items():
            setattr(module, n, rec.fn)
    for n, rec in recorders.items():
        for args, kwargs in rec.calls:
            src, options = specialise(rec.fn, args, dict(kwargs))
            binary = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
            with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                f.write(binary.asm["cubin"])
                f.flush()
                usage = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True,
                                       text=True, check=True).stdout
            line = next(x for x in usage.splitlines() if "REG:" in x)
            fields = dict(kv.split(":") for kv in line.split())
            regs, shared = int(fields["REG"]), binary.metadata.shared
            warps = binary.metadata.num_warps
            ptx = binary.asm["ptx"]
            print(json.dumps({
                "case": label, "kernel": n, "regs": regs, "stack": int(fields["STACK"]),
                "shared": shared, "warps": warps, "per_sm": per_sm(regs, shared, warps),
                "cp_async_16B": len(re.findall(r"cp\.async\.cg\.shared\.global \[[^]]*\], "
                                               r"\[[^]]*\], 0x10", ptx)),
                "ld_16B": ptx.count("ld.global.v4.b32") + ptx.count("ld.global.nc.v4.b32"),
            }), flush=True)


def per_sm(regs: int, shared: int, warps: int) -> int:
    """Programs an H100/H200 SM holds at once: 64k registers (allocated per warp in units of
    256), 228 kB of shared memory (1 kB reserved a program), 64 warps, 32 programs."""
    regs_a_warp = -(-regs * 32 // 256) * 256
    return min(65536 // (regs_a_warp * warps), (228 * 1024) // (shared + 1024), 64 // warps, 32)


def rnd(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape).to(dtype)


def main():
    _common.interpreting = lambda: False
    _common.check = lambda op, tensors, dtypes=None: torch.device("cpu")
    _common.sm_count = lambda device: 132
    f32 = torch.float32
    for G, S in ((32, 4096), (1, 0)):  # the 3B attention shapes (20 heads × 128), and G = 1
        t = [rnd(1, G, 20, 128), rnd(1, S + G, 20, 128), rnd(1, S + G, 20, 128),
             rnd(1, G, 20, 128), rnd(1, G, 20, 128)]
        compile_launches(f"attention G={G} S={S}", attn, ["_split_kernel", "_merge_kernel"],
                         lambda t=t, S=S: attn.block_attention(*t, S, 0.1))
    t = [rnd(1, 32, 32, 128), rnd(1, 64, 4, 128), rnd(1, 64, 4, 128), rnd(1, 32, 4, 128),
         rnd(1, 32, 4, 128)]
    compile_launches("attention GQA 8", attn, ["_split_kernel", "_merge_kernel"],
                     lambda: attn.block_attention(*t, 40, 0.1))
    x, win = rnd(1, 32, 5376), rnd(1, 5376, 3, dtype=f32)
    compile_launches("conv fold", conv, ["_conv_kernel"],
                     lambda: conv.causal_conv_block(x, win, rnd(5376, 4), rnd(5376), win))
    x, win = rnd(1, 1, 8192), rnd(1, 8192, 3, dtype=f32)  # Qwen3-Next's Gated DeltaNet: no bias
    compile_launches("conv fold, no bias", conv, ["_conv_kernel"],
                     lambda: conv.causal_conv_block(x, win, rnd(8192, 4), None, win))
    m = (rnd(1, 32, 80, 64), rnd(1, 32, 80), rnd(80, dtype=f32), rnd(80, dtype=f32),
         rnd(1, 32, 128), rnd(1, 32, 128), rnd(80, dtype=f32), rnd(1, 32, 80, 64),
         rnd(1, 80, 64, 128, dtype=f32))
    compile_launches("mamba fold", mamba, ["_mamba_kernel"], lambda: mamba.mamba_block_scan(*m, m[-1]))
    rates = (*m[:3], rnd(32, 80, dtype=f32).expand(1, 32, 80), *m[4:])  # mamba.decay_from
    compile_launches("mamba fold, a rate per token", mamba, ["_mamba_kernel"],
                     lambda: mamba.mamba_block_scan(*rates, rates[-1]))
    q = (rnd(1, 32, 20, 128), rnd(1, 32, 20, 128), rnd(1, 32, 20, 128))
    st, z = rnd(1, 20, 128, 128, dtype=f32), rnd(1, 20, 128, dtype=f32)
    compile_launches("linear fold", lin, ["_linear_kernel"],
                     lambda: lin.linear_block(*q, st, z, "elu1", 1e-6, st, torch.empty_like(z)))
    gk = rnd(1, 32, 20, 128, dtype=f32)
    names = ["_gla_kernel", "_gla_chunk_kernel"]
    compile_launches("gla fold chunk B=1", gla, names, lambda: gla.gla_block(*q, gk, st, 0.1, st))
    q8 = [t.expand(8, -1, -1, -1) for t in (*q, gk)]
    st8 = st.expand(8, -1, -1, -1)
    compile_launches("gla fold chunk B=8", gla, names, lambda: gla.gla_block(*q8, st8, 0.1, st8))
    with _common.tuned(gla, form="scan"):
        compile_launches("gla fold scan", gla, names, lambda: gla.gla_block(*q, gk, st, 0.1, st))
    g, beta = rnd(1, 32, 20, dtype=f32), rnd(1, 32, 20, dtype=f32)
    for B in (1, 8):
        gd_args = [t.expand(B, *t.shape[1:]) for t in (*q, g, beta, st)]
        compile_launches(f"gated_delta fold B={B}", gated_delta, ["_gated_delta_kernel"],
                         lambda a=gd_args: gated_delta.gated_delta_block(*a, 0.1, a[-1]))


if __name__ == "__main__":
    sys.exit(main())
