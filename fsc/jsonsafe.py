"""Values made ready for JSON the one way fsc writes them (`--json`, `fsc export`), and a JSON
object read back from a file that may not hold one (`json_object`)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any


def plain(obj: Any) -> Any:
    """`obj` with non-finite floats as None (JSON has no NaN), mapping keys as text, tuples as
    lists and paths as text, a DECIMAL as the number it is where a JSON number holds it exactly
    (else as text, every digit kept); anything else as it is (json's `default=str` takes the
    rest)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Decimal) and obj.is_finite():
        as_float = float(obj)
        return as_float if Decimal(repr(as_float)) == obj else str(obj)
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def json_object(path) -> dict:
    """The JSON object a file holds, as a dict; {} for a file that is missing or unreadable,
    not JSON, or JSON of another kind (None, a list): a config read where it may be."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, TypeError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
