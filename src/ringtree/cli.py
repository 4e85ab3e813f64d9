"""The ``ringtree`` command: parse, call the library, print. One module per command in
``ringtree.commands``; each has ``register(subparsers)`` that sets ``func`` on its parser.

Errors from bad input are one line (``ringtree: error: ... (see 'ringtree CMD --help')``) with
exit status 2. Anything else that escapes a command is a bug: one line too, exit status 1
(``python -X dev -m ringtree ...`` shows its traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import signal
import sys
import threading
from typing import Any

from ringtree import __version__
from ringtree.errors import RingtreeError

# Command modules, in the order ``ringtree --help`` lists them.
COMMANDS = [
    "trace", "demo", "run", "cost", "links", "clusters", "crossover", "plan", "lab", "bench",
    "calibrate", "validate", "profile",
]


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are a single line that points at this (sub)command's --help, and
    exit 2. Each parser records its name, so that errors the command raises later point at
    the same help (the innermost subcommand's value wins)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.set_defaults(command_prog=self.prog)
        # "--size -5GB" reaches the value's parser (which names the bad value) instead of
        # argparse reading "-5GB" as an unknown option: no option starts with a digit
        self._negative_number_matcher = re.compile(r"^-[0-9.]")

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"ringtree: error: {one_line(message)} (see '{self.prog} --help')\n")


def one_line(message: str) -> str:
    """``message`` with its line breaks (from a library's text) made spaces."""
    return " ".join(message.split())


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every command registered."""
    parser = _Parser(
        prog="ringtree",
        description="Collective communication you can run, see and predict.",
    )
    parser.add_argument("--version", action="version", version=f"ringtree {__version__}")
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
    try:
        return _main(argv)
    except Exception as e:  # a bug, not bad input: one line all the same
        if sys.flags.dev_mode:
            raise
        print(
            f"ringtree: internal error: {type(e).__name__}: {one_line(str(e))} (a bug in "
            "ringtree: please report it with the command; python -X dev -m ringtree ... shows "
            "where)",
            file=sys.stderr,
        )
        return 1


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
    except SystemExit as e:  # --help, --version, or a bad argument (said already): a status
        return e.code if isinstance(e.code, int) else int(e.code is not None)
    if unknown:  # said by the subcommand that was given them, pointing at its --help
        prog = getattr(args, "command_prog", parser.prog)
        sys.stderr.write(
            f"ringtree: error: unrecognized arguments: {one_line(' '.join(unknown))} "
            f"(see '{prog} --help')\n"
        )
        return 2
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return int(args.func(args) or 0)
    except RingtreeError as e:
        print(
            f"ringtree: error: {one_line(str(e))} (see '{args.command_prog} --help')",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print("ringtree: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed early (`ringtree ... | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
