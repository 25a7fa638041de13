"""Evals stopped partway (SIGTERM as a loss eval scores its second length, or as genppl
decodes at K 4), for the tests of resuming them."""

import os
import signal


def stop_at_second_length(monkeypatch):
    """SIGTERM to this process when the loss task scores length 128; the real scorer back."""
    from fsc.eval import loss

    real = loss.heldout_loss

    def stopped(model, tok, grid, n, device):
        if n == 128:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(model, tok, grid, n, device)

    monkeypatch.setattr(loss, "heldout_loss", stopped)
    return real


def stop_genppl_at_k4(monkeypatch) -> list:
    """SIGTERM to this process as genppl first decodes a cell at K 4 (the decodings before it
    stored); later calls decode. Returns the K of every decoding asked for, in order."""
    from fsc.eval import genppl

    real, seen = genppl._decoded, []

    def stopped(grid, model, tok, scorer, samples, length, d, device, *rest):
        seen.append(d.K)
        if d.K == 4 and len(seen) < 4:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(grid, model, tok, scorer, samples, length, d, device, *rest)

    monkeypatch.setattr(genppl, "_decoded", stopped)
    return seen
