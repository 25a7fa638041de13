"""A loss eval stopped partway (SIGTERM as its second length is scored), for the tests of
resuming it."""

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
