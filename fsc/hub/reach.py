"""Before a Hub client is asked anything: whether a name is a local path or a Hub id, and
whether the Hub can be reached at all, so that a mistyped path never goes to the Hub and a
command run offline says so in one line at once, not after the clients' half a minute of
retries. Light: nothing here imports a Hub client.
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "https://huggingface.co"
CONNECT_S = 3.0  # an endpoint that does not take a connection this fast counts as out of reach
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
_TRUE = ("1", "ON", "YES", "TRUE")


def looks_local(spec: str) -> bool:
    """Whether `spec` names a local path rather than a Hub id: it exists, it starts with ./,
    ../, / or ~, or its first component is a directory here (`runs/nope` where runs/ is)."""
    path = Path(spec)
    return (path.exists() or spec in (".", "..") or spec.startswith(("./", "../", "/", "~"))
            or (len(path.parts) > 1 and Path(path.parts[0]).is_dir()))


def unreachable(datasets: bool = False) -> str | None:
    """Why the Hub cannot answer now, in a few words, or None. An offline variable set says so
    (HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE; with `datasets`, HF_DATASETS_OFFLINE too); else the
    endpoint (HF_ENDPOINT, or its proxy) is tried, once per process, and when it takes no
    connection within CONNECT_S every Hub client of this process reads its local cache alone
    from then on (`cache_only`), as the variable would have made it."""
    for var in OFFLINE_VARS + (("HF_DATASETS_OFFLINE",) if datasets else ()):
        if os.environ.get(var, "").strip().upper() in _TRUE:
            return f"{var} is set"
    why = _connect(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT)
    if why is not None:
        cache_only()
    return why


@functools.cache
def _connect(endpoint: str) -> str | None:
    url = urlsplit(endpoint)
    host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(url.scheme)
    if proxy and host and not urllib.request.proxy_bypass(host):
        via = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = via.hostname, via.port or 80
    try:
        socket.create_connection((host, port), timeout=CONNECT_S).close()
    except (OSError, UnicodeError) as e:
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        return f"no connection to {endpoint}: {why}"
    return None


def cache_only() -> None:
    """Every Hub client of this process (huggingface_hub, transformers, datasets) reads its
    local cache alone from here on: a client reads HF_HUB_OFFLINE when it is imported, so the
    flags of those imported already are set beside the variable."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None:
        hub.HF_HUB_OFFLINE = True
    config = sys.modules.get("datasets.config")
    if config is not None:
        config.HF_HUB_OFFLINE = config.HF_DATASETS_OFFLINE = True


@contextmanager
def quiet() -> Iterator[None]:
    """The Hub client's warnings ("Retrying in 8s [Retry 5/5]") off for the body of the with:
    a failure is said once, in fsc's own line."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
