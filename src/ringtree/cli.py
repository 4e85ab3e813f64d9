"""The ``ringtree`` command: parse, call the library, print. One module per command in
``ringtree.commands``; each has ``register(subparsers)`` that sets ``func`` on its parser.

Errors from bad input are one line (``ringtree: error: ...``) with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

from ringtree.errors import RingtreeError

# Command modules, in the order ``ringtree --help`` lists them.
COMMANDS = [
    "trace", "demo", "run", "cost", "links", "crossover", "plan", "lab", "bench", "calibrate",
    "validate",
]  # fmt: skip


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are a single line and exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"ringtree: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every command registered."""
    parser = _Parser(
        prog="ringtree",
        description="Collective communication you can run, see and predict.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"ringtree.commands.{name}").register(sub)
    return parser


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM ends the command like Ctrl-C does: through its ``finally`` blocks, so that
    the processes it started are stopped too (the default action would orphan them)."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return int(args.func(args) or 0)
    except RingtreeError as e:
        print(f"ringtree: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ringtree: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed early (`ringtree ... | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
