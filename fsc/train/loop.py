"""The training loop, its checkpoints and resuming.

A training directory (`--out DIR`) holds one checkpoint per save, `step-NNNNNN/` (the
checkpoint writer's layout, so `fsc eval`, `fsc decode` and `fsc push` take it as it is), and
`latest`, naming the newest. A save is built in a hidden directory and renamed into place, then
`latest` is replaced the same way, so a process killed mid-save leaves `latest` naming the
previous whole checkpoint (the next save clears what the killed one left).

A run saves at the end, every --save-every steps (milestones, all kept), and every
--save-minutes of wall time and when a stop signal ends it (rolling saves: only the newest
--keep stay), so a run killed outright loses at most those minutes. Beside the weights each
step directory holds the training state, two files (fsc.train.state names, reads and prunes
them): neither is in the checksums, so a push leaves them behind.

Every batch and every mask draw is seeded from (seed, step, micro-batch), so a run of N steps
and one of N/2 steps resumed for N/2 more hold bit-identical weights on the CPU.
"""

from __future__ import annotations

import copy
import json
import os
import time
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import save_file

from fsc.checkpoint.io import save_checkpoint
from fsc.data.sources import BOS, absolute
from fsc.errors import CheckpointError, UsageError
from fsc.interrupts import StopSignals
from fsc.model.cache import Carry
from fsc.model.fla_scan import train_backend
from fsc.model.layers import TORCH_DTYPES
from fsc.objective import Batch, loss_of
from fsc.seeds import derive
from fsc.source import LATEST
from fsc.tokenizer import carried_files
from fsc.train import parallel
from fsc.train.config import (  # noqa: F401 - re-exported: the run's settings and schedules
    KEEP,
    OBJECTIVES,
    SAVE_MINUTES,
    TrainConfig,
    TrainResult,
    TrainStep,
    block_at,
    block_sizes,
    lr_at,
)
from fsc.train.state import (
    STATE_FORMAT,
    STATE_JSON,
    STATE_TENSORS,
    carried_of,
    carried_tensors,
    prune,
    step_dir,
)


def freeze_mixers(model, kinds) -> None:
    """Stop training the mixers of the layers whose mixer is one of `kinds`: their parameters
    no longer require a gradient, so `make_optimizer` leaves them out."""
    for layer in model.layers:
        if layer.mixer.kind in kinds:
            layer.mixer.requires_grad_(False)


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW over the parameters that train; weight decay on matrices only (not on norms,
    biases or per-head scalars)."""
    trained = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in trained if p.ndim >= 2]
    rest = [p for p in trained if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay},
              {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95), eps=1e-8, foreach=False)


def _param_index(model, opt) -> dict[str, int]:
    """Parameter name -> its index in the optimizer's state dict."""
    ids = {id(p): n for n, p in model.named_parameters()}
    order = [ids[id(p)] for g in opt.param_groups for p in g["params"]]
    return {n: i for i, n in enumerate(order)}


class Trainer:
    """One training run: model, optimizer and data, from scratch or from a saved state."""

    def __init__(self, cfg: TrainConfig, recipe, model, tokenizer, state=None, data=None):
        self.cfg, self.recipe, self.model, self.tok = cfg, recipe, model, tokenizer
        self.G = recipe.block_size
        self.device = torch.device(cfg.device)
        self.data = data or cfg.open_data(tokenizer, self.G)
        freeze_mixers(model, cfg.freeze)
        self.opt = make_optimizer(model, cfg)
        self.step = 0
        self.losses: list[float] = []
        self.on_log = None  # callback(TrainStep) for every logged step
        self.on_step = None  # callback(step, loss, tokens_per_s) after every step
        self.evaluate = None  # callback(trainer) -> {"eval_accuracy": the exact match}
        self.clock = time.monotonic  # of the rolling saves
        self.reached = False  # an in-loop eval reached cfg.stop_at (rank 0 evaluates)
        self.carried: dict[int, list] = {}  # state passing: micro-batch -> its rows' end states
        self.rank, self.world = parallel.world()
        self.backend = train_backend(cfg.train_backend, self.device)
        model.set_train_backend(self.backend)
        gap = model.state_passing_gap() if cfg.state_passing else None
        if gap:
            raise UsageError(f"--state-passing: {gap}")
        if state is not None:
            self._restore(*state)

    # -- state -------------------------------------------------------------------------------
    def _restore(self, state: dict, tensors: dict[str, torch.Tensor]) -> None:
        index = _param_index(self.model, self.opt)
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, p in params.items():
                master = tensors.get(f"master.{name}")
                if master is not None:
                    p.copy_(master)
        moments = {}
        # stopped before its first step, the optimizer has no moments yet: a fresh one is the same
        fresh = int(state["step"]) == 0 and not any(k.startswith("exp_avg.") for k in tensors)
        for name, i in ({} if fresh else index).items():
            try:
                moments[i] = {"step": torch.tensor(float(state["step"])),
                              "exp_avg": tensors[f"exp_avg.{name}"].to(self.device),
                              "exp_avg_sq": tensors[f"exp_avg_sq.{name}"].to(self.device)}
            except KeyError:
                raise CheckpointError(f"training state lacks the moments of {name!r}") from None
        sd = self.opt.state_dict()
        sd["state"] = moments
        self.opt.load_state_dict(sd)
        self.step = int(state["step"])
        self.losses = [float(x) for x in state.get("losses", [])]
        self.carried = self._own_rows(carried_of(tensors, self.device))
        torch.set_rng_state(tensors["rng.torch"])
        if self.device.type == "cuda" and "rng.cuda" in tensors:
            torch.cuda.set_rng_state(tensors["rng.cuda"], self.device)

    def _all_rows(self) -> dict[int, list]:
        """State passing's carried states of the global batch, every process's rows in rank
        order (each holds its share's): what a save keeps, so that every process of a resumed
        run starts from its own rows. Every process takes part: they save at the same steps."""
        if self.world == 1 or not self.carried:
            return self.carried
        return {micro: [None if end is None else
                        {k: parallel.gather_rows(t, self.world) for k, t in end.items()}
                        for end in ends] for micro, ends in self.carried.items()}

    def _own_rows(self, carried: dict[int, list]) -> dict[int, list]:
        """This process's rows of carried states saved for the global batch (`_all_rows`); a
        tensor of another size (a save that kept rank 0's rows alone) is taken as it is."""
        if self.world == 1:
            return carried
        size, mine = self.cfg.batch * self.world, slice(self.rank * self.cfg.batch,
                                                        (self.rank + 1) * self.cfg.batch)
        return {micro: [None if end is None else
                        {k: t[mine] if t.shape[0] == size else t for k, t in end.items()}
                        for end in ends] for micro, ends in carried.items()}

    def _state(self, milestone: bool, carried: dict[int, list] | None = None,
               reached: bool = False) -> tuple[dict, dict[str, torch.Tensor]]:
        tensors: dict[str, torch.Tensor] = {"rng.torch": torch.get_rng_state()}
        if self.device.type == "cuda":
            tensors["rng.cuda"] = torch.cuda.get_rng_state(self.device)
        index = _param_index(self.model, self.opt)
        opt_state = self.opt.state_dict()["state"]
        for name, i in index.items():
            if i in opt_state:
                tensors[f"exp_avg.{name}"] = opt_state[i]["exp_avg"]
                tensors[f"exp_avg_sq.{name}"] = opt_state[i]["exp_avg_sq"]
        if self.recipe.dtype != "fp32":
            for name, p in self.model.named_parameters():
                tensors[f"master.{name}"] = p.detach()
        tensors.update(carried_tensors(self.carried if carried is None else carried))
        cfg = self.cfg
        state = {"format": STATE_FORMAT, "step": self.step, "config": asdict(cfg),
                 "data_position": self.step * cfg.accum * cfg.batch * self.world,
                 "processes": self.world, "losses": self.losses, "milestone": milestone,
                 "reached": reached}
        return state, {k: v.detach().contiguous().cpu() for k, v in tensors.items()}

    def training_facts(self) -> dict:
        """What the checkpoint's config.json and card record of the run (`training`): enough to
        say how the weights were made; the resumable state is the training state beside it."""
        cfg = self.cfg
        return {"data": absolute(cfg.data), "objective": cfg.objective, "steps": self.step,
                "seq_len": cfg.seq_len, **({"lengths": cfg.lengths} if cfg.lengths else {}),
                "batch": cfg.batch * cfg.accum * self.world,
                **({"micro_batch": cfg.batch, "accum": cfg.accum, "nproc": self.world}
                   if cfg.accum > 1 or self.world > 1 else {}),
                **({"weighting": cfg.weighting} if cfg.objective != "ar" else {}),
                **({"state_passing": True} if cfg.state_passing else {}),
                "lr": cfg.lr, "warmup": cfg.warmup, "min_lr_ratio": cfg.min_lr_ratio,
                "weight_decay": cfg.weight_decay, "grad_clip": cfg.grad_clip,
                "seed": cfg.seed, "tokenizer": cfg.tokenizer, "needle_digits": self._digits(),
                **({"supervise_needle": True} if cfg.supervise_needle else {}),
                # knobs refused for data that does not read them: given, their data reads them
                **({"pairs": cfg.pairs} if cfg.pairs != TrainConfig.pairs else {}),
                **({"text_field": cfg.text_field}
                   if cfg.text_field != TrainConfig.text_field else {}),
                **({"suite": cfg.suite} if cfg.suite else {}),
                "train_backend": self.backend, "dtype": cfg.dtype,
                "final_loss": self.losses[-1] if self.losses else None,
                **({"adapted_from": cfg.adapted_from} if cfg.adapted_from else {}),
                **({"mask_added": cfg.mask_added} if cfg.mask_added else {}),
                **({"started_from": cfg.started_from} if cfg.started_from else {}),
                **({"anneal": cfg.anneal} if cfg.anneal else {}),
                **({"freeze": cfg.freeze} if cfg.freeze else {})}

    def _digits(self) -> int | None:
        """The pass key's (niah's values') digits, resolved from the default for G, of the data
        or of the first task of a mix that reads them; None for other data."""
        tasks = getattr(self.data, "tasks", None) or [getattr(self.data, "task", None)]
        return next((t.digits for t in tasks if getattr(t, "digits", None) is not None), None)

    def save(self, milestone: bool = False, reached: bool = False) -> Path:
        """Write step-NNNNNN (weights, card, training state) and point `latest` at it (rank 0
        only: the other processes hold the same weights); then prune the rolling saves to the
        newest --keep. A milestone (--save-every, the last step) is never pruned. `reached`:
        the run ends here at --stop-at (its state says so, and a resume of it is a no-op)."""
        out = Path(self.cfg.out)
        dest = step_dir(out, self.step)
        carried = self._all_rows()  # (every process, before rank 0 alone writes)
        if self.rank != 0 or dest.exists():  # saved at this step already (the end right after --save-every)
            return dest
        state, tensors = self._state(milestone, carried, reached)

        def extra(tmp: Path) -> None:
            save_file(tensors, tmp / STATE_TENSORS, metadata={"format": str(STATE_FORMAT)})
            (tmp / STATE_JSON).write_text(json.dumps(state, indent=1) + "\n")

        model = self.model
        dtype = TORCH_DTYPES[self.recipe.dtype]
        if next(model.parameters()).dtype != dtype:  # fp32 masters; the checkpoint's dtype
            model = copy.deepcopy(model).to(dtype)
        facts = self.training_facts()
        if facts["final_loss"] is None:
            facts["final_loss"] = float("nan")
        # stopped before its first step, a run from a recipe saves its seeded weights (for
        # --resume): recorded as such, so its card and every command call them untrained
        seeded = self.step == 0 and not (self.cfg.started_from or self.cfg.adapted_from)
        save_checkpoint(model, dest, training=facts, extra=extra, bos=BOS,
                        seed=self.cfg.seed if seeded else None,
                        include=carried_files(self.cfg.tokenizer))  # self-contained
        tmp = out / f".{LATEST}.tmp"
        tmp.write_text(dest.name + "\n")
        os.replace(tmp, out / LATEST)
        prune(out, self.cfg.keep, dest)
        return dest

    # -- the loop ----------------------------------------------------------------------------
    def _autocast(self):
        if self.cfg.dtype == "bf16" and self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return nullcontext()

    def _carry(self, micro: int) -> Carry:
        """State passing: micro-batch `micro` starts from the states its rows ended in at the
        previous step (at the first step, empty)."""
        n = len(self.model.layers)
        ends = self.carried.get(micro, [])
        return Carry(list(ends) + [None] * (n - len(ends)))

    def block_size(self) -> int:
        """The block size this step's objective draws at (`block_at`: G once annealed)."""
        return block_at(self.cfg.anneal, self.G, self.step)

    def train_step(self) -> tuple[float, float, int]:
        """One optimizer step: (loss, grad norm before clipping, tokens read)."""
        cfg, step = self.cfg, self.step
        lr = lr_at(cfg, step)
        for g in self.opt.param_groups:
            g["lr"] = lr
        self.model.train()
        total, tokens = 0.0, 0
        size = cfg.batch * self.world  # the global batch; this process trains on its share
        mine = slice(self.rank * cfg.batch, (self.rank + 1) * cfg.batch)
        for micro in range(cfg.accum):
            first = (step * cfg.accum + micro) * size
            batch = Batch.of([self.data.sample(first + j) for j in range(size)], self.device)
            gen = torch.Generator().manual_seed(derive(cfg.seed, step, micro, 3))
            carry = self._carry(micro) if cfg.state_passing else None
            with self._autocast():
                loss, n = loss_of(self.model, cfg.objective, batch, self.block_size(),
                                  self.tok.mask_id, gen, cfg.weighting, mine, carry)
            (loss / cfg.accum).backward()
            if carry is not None:
                self.carried[micro] = carry.detached()
            total += float(loss.detach()) / cfg.accum
            tokens += n
        parallel.average_gradients(self.model, self.world)
        total = parallel.mean(total, self.world, self.device)
        tokens *= self.world
        params = [p for p in self.model.parameters() if p.grad is not None]
        clip = cfg.grad_clip if cfg.grad_clip > 0 else float("inf")
        norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.step += 1
        self.losses.append(total)
        return total, norm, tokens

    def run(self, stop_after: int | None = None) -> TrainResult:
        """Train to `cfg.steps` (or `stop_after` more steps), saving at --save-every, every
        --save-minutes and at the end. Ctrl-C, SIGTERM, SIGUSR1 or SIGUSR2 (on any process)
        ends the run after the step under way, saved, with `interrupted` set; an in-loop eval
        whose exact match reaches `cfg.stop_at` ends it, saved, with `reached` set."""
        cfg = self.cfg
        end = cfg.steps if stop_after is None else min(cfg.steps, self.step + stop_after)
        t0, done_tokens, stepping = time.perf_counter(), 0, 0.0  # stepping: in train_step
        last_save = self.clock()
        unlogged = None  # the last step's row, where its step was not logged
        with StopSignals(defer=True) as stops:
            while True:
                signum, reached, due = self._agree(stops, end, last_save)
                if self.step >= end or signum or reached:
                    break
                if due:  # (the rolling save after the last step, agreed with the stops)
                    self.save()
                    last_save = self.clock()
                ts = time.perf_counter()
                loss, norm, tokens = self.train_step()
                seconds = time.perf_counter() - ts
                done_tokens, stepping = done_tokens + tokens, stepping + seconds
                if self.on_step is not None:
                    self.on_step(self.step, loss, tokens / seconds)
                # the first step too: a curve (and the report's first loss) begins where it did
                log = self.step % cfg.log_every == 0 or self.step in (1, end)
                evaluate = bool(cfg.eval_every) and self.step % cfg.eval_every == 0
                row = TrainStep(self.recipe.name, self.recipe.recipe_hash, cfg.objective,
                                cfg.data, self.step, loss, lr_at(cfg, self.step - 1), norm,
                                done_tokens, tokens / seconds, time.perf_counter() - t0)
                unlogged = None if log or evaluate else row
                if (log or evaluate) and self.on_log is not None:
                    if evaluate and self.evaluate is not None:
                        row.eval_accuracy = self.evaluate(self)["eval_accuracy"]
                        self.reached = (cfg.stop_at is not None
                                        and row.eval_accuracy >= cfg.stop_at)
                    self.on_log(row)
                if cfg.save_every and self.step % cfg.save_every == 0:
                    self.save(milestone=True, reached=self.reached)  # (the run may end here)
                    last_save = self.clock()
            if self.step >= end:  # a signal during the last step stops nothing: the run is done
                signum = 0
            if unlogged is not None and self.on_log is not None:  # a stop between log steps:
                self.on_log(unlogged)  # the store holds the step the run ended at
            # the end, --stop-at (both kept for good), a --stop-after or a stop (rolling)
            last = self.save(milestone=self.step == cfg.steps or reached, reached=reached)
        return TrainResult(self.step, str(last), list(self.losses), bool(signum),
                           time.perf_counter() - t0, done_tokens, stop_signal=signum,
                           reached=reached, step_seconds=stepping)

    def _agree(self, stops: StopSignals, end: int, last_save: float) -> tuple[int, bool, bool]:
        """What every process does next, the same on each, in one all-reduce: (the stop signal
        any process received (0: none), whether an in-loop eval reached --stop-at (rank 0
        evaluates), whether a rolling save is due (--save-minutes; on every process when one's
        clock says so, since a save gathers the processes' carried states; never after the
        last step, which saves right after)), so that all of them end or save after the same
        step."""
        due = (self.step < end and bool(self.cfg.save_minutes)
               and self.clock() - last_save >= 60 * self.cfg.save_minutes)
        signum, reached, due = parallel.largest((stops.signum or 0, int(self.reached), int(due)),
                                                self.world, self.device)
        return signum, bool(reached), bool(due)
