"""Sizes in messages are written in the binary unit that shows them: 24.0 MiB, not
"25165824 bytes (0.0 GiB)"."""

import pytest

from fsc.errors import UsageError, WeightsDoNotFit
from fsc.loading import check_fits
from fsc.recipe import load_recipe
from fsc.text import human_bytes
from fsc.train.fits import check_training_fits


@pytest.mark.parametrize(("n", "shown"), [
    (0, "0 bytes"), (512, "512 bytes"), (1024, "1.00 KiB"), (904_345, "883 KiB"),
    (24 * 2**20, "24.0 MiB"), (3 * 2**29, "1.50 GiB"), (150_754_820_096, "140 GiB"),
    (2**41, "2.00 TiB")])
def test_human_bytes(n, shown):
    assert human_bytes(n) == shown


def test_does_not_fit_messages_write_sizes_in_units_that_show_them():
    with pytest.raises(WeightsDoNotFit) as e:
        check_fits(load_recipe("tiny_attn"), "cpu", S=2**20, B=4, G=4, budget=24 * 2**20)
    msg = str(e.value)
    assert "but cpu has 24.0 MiB free" in msg and "needs 2.00 GiB at S 1048576" in msg, msg
    assert "weights 369 KiB" in msg and "bytes" not in msg and "0.0" not in msg, msg
    with pytest.raises(WeightsDoNotFit) as e:  # the weights alone
        check_fits(load_recipe("attn_3b"), "cpu", budget=24 * 2**20)
    assert "its weights need 4.41 GiB but cpu has 24.0 MiB free" in str(e.value)
    with pytest.raises(UsageError) as e:
        check_training_fits(load_recipe("tiny_attn"), "cpu", 4096, 64, budget=24 * 2**20)
    assert "but cpu has 24.0 MiB free" in str(e.value) and "attention masks 32.0 MiB" in str(e.value)
