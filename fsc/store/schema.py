"""One-line descriptions of every table, view and column of the store.

The DDL lives in `migrations.py`; this is the documentation of the schema those migrations
produce, less the row tables' declared columns (`Column`: an eval task's own measures, which its
module declares and describes). A test checks that the two agree name for name, and `fsc
schema` / docs/store.md are rendered from here and those declarations. All timestamps are UTC (DuckDB `TIMESTAMP` without a zone).
"""

from __future__ import annotations

from dataclasses import dataclass

RUN_KINDS = ("profile", "bench", "train", "eval")  # what a run of `runs` records


@dataclass(frozen=True)
class Relation:
    kind: str  # 'table' | 'view'
    description: str
    columns: dict[str, str]  # column name -> description, in table order


@dataclass(frozen=True)
class Column:
    """A column that a module above the store declares for a row table (an eval task's own
    measures, the harness's metrics): `Store.add_rows` adds it to the table and its view when
    rows first carry it, and `fsc schema` describes it with `description`. Such a column needs
    no migration; its name, type and meaning live with the code that fills it."""

    name: str
    type: str  # a DuckDB type: DOUBLE, BIGINT, INTEGER, VARCHAR or BOOLEAN
    description: str


_POINT_MEASURES = {
    "step_ms": "Median wall time of one step (frontier block against the cache), ms.",
    "step_ms_p10": "10th percentile of the step samples, ms.",
    "step_ms_p90": "90th percentile of the step samples, ms.",
    "fold_ms": "Median wall time of one fold (finished block written into the cache), ms.",
    "fold_ms_p10": "10th percentile of the fold samples, ms.",
    "fold_ms_p90": "90th percentile of the fold samples, ms.",
    "tokens_per_s": "Throughput B*G / (K*step + fold), tokens per second.",
    "peak_bytes": (
        "Peak device memory allocated during the point, bytes (CUDA allocator peak; on the "
        "CPU, which keeps no such statistic, the weights plus the cache as allocated, with "
        "room for the block: an attention layer's K/V for S + G tokens)."
    ),
    "cache_bytes": "Bytes of the cache at context S for batch B.",
    "weight_bytes": "Bytes of the model weights.",
    "predicted_step_bytes": (
        "Cost model: bytes one step reads and writes (weights + cache + activations)."
    ),
    "predicted_total_bytes": "Cost model: peak device bytes the point needs.",
    "floor_ms": "Cost model: roofline floor of one step (bound resource / device peak), ms.",
    "bound": "Cost model: which resource bounds the step ('memory' or 'compute').",
    "achieved_gbps": "predicted_step_bytes / step time, GB/s (1e9 bytes per second).",
    "roofline_fraction": "floor_ms / step_ms: fraction of the roofline reached (1 = at the floor).",
}

_POINT_AXES = {
    "S": "Context length: finished tokens held in the cache.",
    "B": "Batch: sequences decoded together.",
    "G": "Block size: tokens generated per block (1 = autoregressive).",
    "K": "Denoising steps per block (0: autoregressive, where one fold per token predicts the next).",
    "dtype": "Weight and activation dtype (bf16, fp16, fp32).",
    "backend": "Kernel backend asked for (auto, torch, triton).",
}


_RUN_ENV = {
    "run_status": "Status of the run (running, finished, failed, interrupted).",
    "command": "Command line of the run.",
    "host": "Host name of the run.",
    "device_name": "GPU name or CPU model.",
    "git_commit": "Commit of the fsc source tree.",
    "git_dirty": "Whether tracked files differed from that commit.",
    "fsc_version": "fsc version.",
    "torch_version": "torch version.",
}

_TRAIN_STEP = {
    "run_id": "Run identifier (a run of kind train).",
    "recipe": "Recipe name.",
    "recipe_hash": "Recipe content hash.",
    "objective": "Training objective: frontier (masked-diffusion bound at one frontier block), blocks (every block a frontier at once) or ar (next token).",
    "data": "What --data named: a task or a mix of tasks (passkey, mqar, copy, ruler, ...), a corpus (shakespeare), a file or hf:NAME.",
    "step": "Optimizer steps done.",
    "loss": "Loss of this step, per token, nats (frontier, blocks: the 1/t-weighted bound, or with --weighting masked the mean over masked positions; ar: NLL).",
    "lr": "Learning rate of this step.",
    "grad_norm": "Gradient norm before clipping.",
    "tokens": "Tokens the forward passes read since the run (or its resume) started.",
    "tokens_per_s": "Tokens read per second in this step.",
    "elapsed_s": "Seconds since the run (or its resume) started.",
    "eval_accuracy": "In-loop eval (--eval-every): exact-match accuracy on held-out samples of the task; NULL when not evaluated.",
    "recorded_at": "When the row was written (UTC).",
}

# what every eval cell may fill; a task's own columns (its knobs and measures) are declared by
# its module in fsc/eval/ (fsc.store.schema.Column), the harness's by fsc/harness/run.py
_EVAL_CELL = {
    "run_id": "Run identifier (a run of kind eval).",
    "checkpoint": "Checkpoint directory evaluated.",
    "recipe": "Recipe name.",
    "recipe_hash": "Recipe content hash.",
    "task": "niah (needle retrieval), mqar (associative recall), vt (variable tracking), cwe and fwe (common- and frequent-word extraction), loss (held-out loss), genppl (generative perplexity) or harness (an lm-evaluation-harness metric).",
    "mode": "Decoding: diffusion (block diffusion, G and K) or ar; genppl's reference row: reference (the data's own continuations of the prompts).",
    "G": "Block size decoded with (1 = autoregressive).",
    "K": "Denoising steps per block (0: autoregressive).",
    "length": "Sequence length of the cell's prompts, tokens.",
    "train_length": "Sequence length the checkpoint was trained at (NULL if unknown).",
    "length_ratio": "length / train_length.",
    "depth": "niah: where the needle sits, 0 (start) to 1 (end).",
    "pairs": "mqar: key-value pairs per sample.",
    "n": "Items scored: samples (niah, vt, cwe, fwe, genppl), queries (mqar), sequences (loss).",
    "correct": "Items decoded exactly right.",
    "accuracy": "correct / n.",
    "loss": "loss: held-out loss per token, nats (the diffusion bound over every block, or AR NLL).",
    "tokens_per_s": "Prompt and answer tokens through the decoder per second (genppl: generated tokens per second of decoding alone).",
    "seconds": "Wall time of the cell, s.",
    "recorded_at": "When the row was written (UTC).",
    "token_accuracy": "Fraction of the scored tokens (key digits, answer tokens) decoded right: partial credit beside the exact match.",
}

SCHEMA: dict[str, Relation] = {
    "schema_migrations": Relation(
        "table",
        "Migrations applied to this store, one row each, in order.",
        {
            "version": "Migration number (1-based position in the code's ordered list).",
            "name": "Name of the migration function.",
            "applied_at": "When it was applied (UTC).",
        },
    ),
    "runs": Relation(
        "table",
        "One row per fsc invocation that records measurements (a profile sweep, ...).",
        {
            "run_id": "Run identifier: UTC start time plus a random suffix.",
            "kind": f"What ran: {', '.join(RUN_KINDS)}.",
            "command": "The command line that started the run.",
            "status": "running, finished, failed or interrupted; a killed run stays 'running'.",
            "started_at": "When the run started (UTC).",
            "ended_at": "When the run ended (UTC); NULL while running or after a kill.",
            "pid": "Process id of the run on its host (fsc runs checks whether it is alive).",
            "host": "Host name the run ran on.",
            "env_id": "Software and hardware environment (environments.env_id).",
            "config": "Run configuration as JSON text (sweep axes, repeats, ...).",
            "error": "Error message of a failed or interrupted run.",
            "resumed_at": "When the run was last resumed (UTC); NULL if never.",
            "stopped_s": "Seconds it sat stopped before its resumes (its ended_at, else its "
                         "last row, to the resume); NULL if never resumed.",
        },
    ),
    "recipes": Relation(
        "table",
        "Every recipe measured, keyed by its content hash.",
        {
            "recipe_hash": "Content hash of the validated recipe.",
            "name": "Recipe name.",
            "yaml": "The recipe's YAML text as loaded.",
            "layer_plan": "Mixer name of each layer, in order.",
            "first_seen": "When the store first saw this recipe (UTC).",
        },
    ),
    "environments": Relation(
        "table",
        "Software and hardware a run ran on, keyed by a hash of its content.",
        {
            "env_id": "Hash of the other columns' values (same environment, same id).",
            "fsc_version": "fsc package version.",
            "python_version": "Python version.",
            "torch_version": "torch version.",
            "triton_version": "triton version (NULL if not installed).",
            "cuda_version": "CUDA version torch was built with (NULL on a CPU build).",
            "driver_version": "NVIDIA driver version (NULL without a GPU).",
            "device_name": "GPU name, or the CPU model when the run used the CPU.",
            "device_memory_bytes": "Total memory of that device (GPU memory, or host RAM), bytes.",
            "host": "Host name.",
            "platform": "Operating system and machine.",
            "git_commit": "Commit of the fsc source tree (NULL outside a git checkout).",
            "git_dirty": "Whether tracked files differed from that commit.",
            "first_seen": "When the store first saw this environment (UTC).",
        },
    ),
    "profile_points": Relation(
        "table",
        "One row per sweep point of a profile run, written as soon as the point finishes.",
        {
            "point_id": "Point identifier (unique in the store).",
            "run_id": "Run the point belongs to (runs.run_id).",
            "recipe": "Recipe name.",
            "recipe_hash": "Recipe content hash (recipes.recipe_hash).",
            "layer_plan": "Mixer name of each layer, in order.",
            **_POINT_AXES,
            "mixer_backends": "JSON text: the backend each mixer kind actually ran.",
            "device": "Device the point ran on (cuda:0, cpu).",
            "status": "ok, oom (did not fit or ran out of memory) or error.",
            "error": "Error text of an oom or error point.",
            **_POINT_MEASURES,
            "started_at": "When the point started (UTC).",
            "ended_at": "When the point ended (UTC).",
        },
    ),
    "samples": Relation(
        "table",
        "Raw timing samples behind each point's median and percentiles.",
        {
            "point_id": "Point the sample belongs to (profile_points.point_id).",
            "phase": "'step' or 'fold'.",
            "idx": "Repeat number, 0-based.",
            "ms": "Wall time of that repeat, ms.",
        },
    ),
    "bench_results": Relation(
        "table",
        "Figures from `make bench` (python -m tools.bench): one row per measured number.",
        {
            "run_id": "Run that measured it (runs.run_id, kind 'bench').",
            "name": "What was measured, e.g. 'decode.tokens_per_s'.",
            "params": "JSON text: the settings of the measurement (recipe, length, cached, ...).",
            "value": "The number.",
            "unit": "Its unit (ms, tok/s, x, ...).",
            "recorded_at": "When it was recorded (UTC).",
        },
    ),
    "artifacts": Relation(
        "table",
        "Checkpoints saved, pushed to or pulled from the Hugging Face Hub.",
        {
            "artifact_id": "Artifact identifier.",
            "path": "Local checkpoint directory.",
            "recipe_hash": "Recipe content hash of the checkpoint.",
            "files_sha256": "JSON text: file name -> sha256 of each checkpoint file.",
            "repo": "Hub repository id (NULL for a local save).",
            "revision": "Hub revision asked for (branch, tag or commit).",
            "commit_id": "Hub commit the push created or the pull resolved to.",
            "created_at": "When the action happened (UTC).",
            "action": "saved, pushed or pulled.",
        },
    ),
    "profile": Relation(
        "view",
        "One row per profile point with its run and environment: the table to query.",
        {
            "point_id": "Point identifier.",
            "run_id": "Run identifier.",
            "recipe": "Recipe name.",
            "recipe_hash": "Recipe content hash.",
            "layer_plan": "Mixer name of each layer, in order.",
            **_POINT_AXES,
            "mixer_backends": "JSON text: the backend each mixer kind actually ran.",
            "device": "Device the point ran on.",
            "status": "Point status: ok, oom or error.",
            "error": "Error text of an oom or error point.",
            **_POINT_MEASURES,
            "started_at": "When the point started (UTC).",
            "ended_at": "When the point ended (UTC).",
            "run_status": "Status of the run (running, finished, failed, interrupted).",
            "command": "Command line of the run.",
            "host": "Host name of the run.",
            "device_name": "GPU name or CPU model.",
            "device_memory_bytes": "Total memory of the device, bytes.",
            "git_commit": "Commit of the fsc source tree.",
            "git_dirty": "Whether tracked files differed from that commit.",
            "fsc_version": "fsc version.",
            "torch_version": "torch version.",
            "triton_version": "triton version.",
            "cuda_version": "CUDA version of the torch build.",
            "driver_version": "NVIDIA driver version.",
        },
    ),
    "train_steps": Relation(
        "table", "One row per logged training step of `fsc train`.", _TRAIN_STEP),
    "eval_cells": Relation(
        "table", "One row per cell of `fsc eval` (a length and depth, or pairs and length).",
        _EVAL_CELL),
    "training": Relation(
        "view", "Training steps with their run and environment: the table to query.",
        {**_TRAIN_STEP, **_RUN_ENV}),
    "evaluation": Relation(
        "view", "Evaluation cells with their run and environment: the table to query.",
        {**_EVAL_CELL, **_RUN_ENV}),
}
