"""MAUVE (Pillutla et al. 2021) of generated continuations against the reference text: the data's
own continuations of the same prompts, with features from the scorer's final hidden state: an
option of genppl (fsc[quality], the mauve-text package), shown beside Gen-PPL, never instead.
"""

from __future__ import annotations

import importlib
import os
import sys
from contextlib import contextmanager

import numpy as np

from fsc.errors import UsageError


def available() -> None:
    """UsageError when the optional mauve-text package is missing."""
    try:
        importlib.import_module("mauve")
    except ImportError:
        raise UsageError("--mauve needs the mauve-text package (pip install 'fsc[quality]')"
                         ) from None


def mauve_of(scored, samples, outs, seed: int) -> float | None:
    """MAUVE of `outs` against the reference continuations of `samples` ((prompt, reference)
    pairs), each featured by the scorer's final hidden state after its prompt and text; None
    for fewer than two samples."""
    if len(outs) < 2:
        return None
    mauve = importlib.import_module("mauve")

    def features(prompt, cont):
        return scored.scorer.hidden(scored.context(prompt) + scored.ids(cont)).numpy()

    p = np.stack([features(pr, o) for (pr, _), o in zip(samples, outs, strict=True)])
    q = np.stack([features(pr, ref) for pr, ref in samples])
    with _quiet_stderr():  # faiss's C++ warns of few points per centroid ('WARNING clustering')
        # the package's defaults otherwise: a bucket per 10 samples ('auto'), scaling 5
        out = mauve.compute_mauve(p_features=p, q_features=q, seed=seed, verbose=False)
    return float(out.mauve)


@contextmanager
def _quiet_stderr():
    """The process's stderr (file descriptor 2, which C++ writes to) sent to /dev/null for the
    block; an error still reaches the caller as its exception."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
