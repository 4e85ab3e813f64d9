"""The engine's decision log, like ``NCCL_DEBUG``: through Python's :mod:`logging`.

``RINGTREE_DEBUG=INFO`` logs, once per call shape and group, what a call runs and why: the
collective, count and dtype, the algorithm (for ``auto``, the predicted times of the best
candidates, the link assumed and any RINGTREE_ALGO in force), chunks and message size. Each
line is tagged as NCCL tags its own, ``host:pid:tid [rank] ringtree INFO ...``.
``RINGTREE_DEBUG=WARN`` (the default) shows warnings only. Lines go to standard error, or to
``RINGTREE_DEBUG_FILE`` (``%h`` becomes the host name, ``%p`` the process id, as in
``NCCL_DEBUG_FILE``). The logger is ``logging.getLogger("ringtree")``: a program may also
configure it itself, in which case ringtree adds no handler.
"""

from __future__ import annotations

import logging
import os
import socket
import threading

from ringtree import config
from ringtree.errors import RingtreeError

LOGGER = logging.getLogger("ringtree")
_configured = False
_lock = threading.Lock()


class _Format(logging.Formatter):
    """``host:pid:tid [rank] ringtree LEVEL message`` (WARNING spelled WARN, as NCCL does)."""

    def format(self, record: logging.LogRecord) -> str:
        level = "WARN" if record.levelname == "WARNING" else record.levelname
        rank = getattr(record, "rank", "?")
        return (f"{_HOST}:{record.process}:{record.thread} [{rank}] ringtree {level} "
                f"{record.getMessage()}")


_HOST = socket.gethostname().split(".")[0]


def configure() -> None:
    """Set the logger up from RINGTREE_DEBUG / RINGTREE_DEBUG_FILE, once per process (unless
    the program configured the ``ringtree`` logger itself). RingtreeError on a bad value."""
    global _configured
    if _configured:
        return
    with _lock:
        if _configured:
            return
        level = config.read("RINGTREE_DEBUG")
        path = config.read("RINGTREE_DEBUG_FILE")
        if not LOGGER.handlers:
            if path:
                path = path.replace("%h", _HOST).replace("%p", str(os.getpid()))
                try:
                    handler: logging.Handler = logging.FileHandler(path)
                except OSError as e:
                    raise RingtreeError(
                        f"RINGTREE_DEBUG_FILE={path!r}: cannot write there ({e.strerror})"
                    ) from None
            else:
                handler = logging.StreamHandler()
            handler.setFormatter(_Format())
            LOGGER.addHandler(handler)
            LOGGER.propagate = False
            LOGGER.setLevel(logging.INFO if level == "INFO" else logging.WARNING)
        _configured = True


def info_enabled() -> bool:
    """Whether INFO lines are wanted (cheap: checked once per new call shape)."""
    configure()
    return LOGGER.isEnabledFor(logging.INFO)


def info(rank: int, message: str) -> None:
    """Log ``message`` at INFO, tagged with ``rank``."""
    LOGGER.info(message, extra={"rank": rank})


_warned: set[str] = set()


def warn_once(message: str) -> None:
    """Log ``message`` at WARN, once per process (a setting that does not apply, say)."""
    if message in _warned:
        return
    _warned.add(message)
    configure()
    LOGGER.warning(message)
