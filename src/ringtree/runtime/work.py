"""What every collective's entry point shares: the call's Group and Options, a bad argument
refused as the call's own checks are, the call issued to :func:`ringtree.runtime.calls.call`,
and its :class:`Work` (the handle ``async_op=True`` returns). :mod:`ringtree.runtime.api`'s
functions check their arguments and call :func:`issue`, one frame on the way to ``calls.call``.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from ringtree.collectives import Collective
from ringtree.errors import RingtreeError
from ringtree.runtime import calls
from ringtree.runtime.groups import Group, group_for, not_a_member_warning
from ringtree.runtime.options import CallOptions, Options


class Work:
    """The handle of an ``async_op=True`` call: ``wait()`` blocks until done and re-raises
    the call's error; ``is_completed()`` does not block; ``get_future()`` is a
    ``torch.futures.Future`` of the output tensors, as torch's Work gives."""

    def __init__(self, future: Future, outputs: list[Any]) -> None:
        self._future = future
        self._outputs = outputs

    def wait(self, timeout: timedelta | float | None = None) -> bool:
        """Block until the collective finished and re-raise its error; True when done.
        ``timeout``: a timedelta, as torch's ``Work.wait`` takes it, or seconds; past it, a
        RuntimeError (torch's "operation timed out"), the call still running."""
        seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
        try:
            self._future.result(seconds)
        except FutureTimeout:
            raise RuntimeError(f"ringtree: operation timed out after {seconds:g} s (it "
                               "goes on: wait again)") from None
        return True

    def is_completed(self) -> bool:
        """Whether the collective has finished (successfully or not)."""
        return self._future.done()

    def exception(self) -> BaseException | None:
        """The call's error once finished, else None."""
        return self._future.exception() if self._future.done() else None

    def get_future(self) -> Any:
        """A ``torch.futures.Future`` completed with the list of output buffers when the
        collective is done (or with its error): what a DDP communication hook returns."""
        import torch

        fut: torch.futures.Future = torch.futures.Future()

        def done(f: Future) -> None:
            error = f.exception()
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(self._outputs)

        self._future.add_done_callback(done)
        return fut


def issue(
    col: Collective, inbuf: Any, outbuf: Any, op: Any, group: Any, async_op: bool,
    options: CallOptions | Options, roots: tuple[int | None, int | None, str] | None = None,
    outputs: list[Any] | None = None, after: Any = None, splits: calls.RankSplits | None = None,
    before: Any = None,
) -> Work | None:
    """Run ``col`` on ``group`` from ``inbuf`` into ``outbuf`` (None: in place) by
    :func:`calls.call`, rooted at ``roots`` (``(global, in_group, name)``, read by
    :meth:`Group.root`; None: group rank 0). None on a rank that is not a member (with
    torch's warning) and when not ``async_op`` (the call done); else a Work of ``outputs``
    (default: the output buffer, else the input)."""
    g, opts = member(group, options, col.value)
    if g is None:
        return None
    root = 0
    if roots is not None:
        try:  # not refusing: a context manager costs microseconds on every call
            root = g.root(*roots)
        except RingtreeError as e:
            calls.refuse(g, col, op, 0, opts, e)
    fut = calls.call(g, col, inbuf, outbuf, op, root, opts, async_op, after, splits, before)
    if fut is None:
        return None
    return Work(fut, outputs if outputs is not None else [inbuf if outbuf is None else outbuf])


def member(group: Any, options: CallOptions | Options,
           what: str) -> tuple[Group | None, Options]:
    """The call's Group (None, with torch's warning, on a rank that is not a member) and its
    Options, made once."""
    opts = options if type(options) is Options else Options.make(options)
    g = group_for(group, opts.timeout_s)
    if g is None:
        not_a_member_warning(what)
    return g, opts


@contextmanager
def refusing(g: Group, col: Collective, opts: Options, op: Any = None) -> Iterator[None]:
    """A bad argument found before the call is refused as the call's own checks are
    (:func:`calls.refuse`): the peers learn it now, not from this rank's next call."""
    try:
        yield
    except RingtreeError as e:
        calls.refuse(g, col, op, 0, opts, e)
