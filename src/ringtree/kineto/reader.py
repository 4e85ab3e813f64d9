"""Stream a Kineto trace file (plain or gzipped JSON) one event at a time, in bounded memory.

A Kineto trace is one JSON object: ``{"schemaVersion": 1, "deviceProperties": [...],
"distributedInfo": {...}, "traceEvents": [{...}, ...], ...}`` (keys in any order; torch 2.13
writes ``traceEvents`` last but one). :class:`TraceFile` reads it in chunks of
:data:`CHUNK` characters and decodes each event with the standard library's C decoder
(``json.JSONDecoder.raw_decode``), so memory holds one chunk and one event, never the file;
the other top-level values (small) are kept whole in :attr:`TraceFile.header`. A bare array of
events (the Chrome trace format's other form) is read too.

Cost: one pass, ~1-2 us of decoding per 200-byte event plus what the caller does with it
(``bench/profile_large_trace.py`` measures a 200 MB trace). Errors are one-line
RingtreeErrors naming the file: not JSON, not a trace (no ``traceEvents``), truncated (the
file ends inside a value), malformed (with the byte where decoding failed), or an event
larger than :data:`MAX_EVENT_CHARS`.
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from ringtree.errors import RingtreeError

CHUNK = 1 << 20
#: One event (or header value) larger than this is refused: Kineto's largest are kernel events
#: with long template names (~4 KB); 64 Mi characters is far past any real one.
MAX_EVENT_CHARS = 64 << 20
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()

Progress = Callable[[int], None]


class TraceFile:
    """One trace file, read once: iterate :meth:`events`; then :attr:`header` holds every
    top-level key but ``traceEvents``. ``progress(bytes_read)`` is called after each chunk
    (bytes of the file on disk, compressed or not: compare with :attr:`size_bytes`)."""

    def __init__(self, path: str | Path, progress: Progress | None = None) -> None:
        self.path = str(path)
        self.progress = progress
        self.header: dict[str, Any] = {}
        try:
            self.size_bytes = Path(path).stat().st_size
        except OSError as e:
            raise RingtreeError(f"cannot read trace {self.path!r}: {e.strerror}") from None
        self._raw: IO[bytes] | None = None
        self._text: IO[bytes] | None = None
        self._decode = codecs.getincrementaldecoder("utf-8")("strict")
        self._buf, self._pos, self._eof, self._offset = "", 0, False, 0

    # -- input ---------------------------------------------------------------------------
    def _open(self) -> None:
        try:
            raw = open(self.path, "rb")  # noqa: SIM115 (closed in events())
        except OSError as e:
            raise RingtreeError(f"cannot read trace {self.path!r}: {e.strerror}") from None
        self._raw = raw
        gz = raw.read(2) == b"\x1f\x8b"
        raw.seek(0)
        self._text = gzip.GzipFile(fileobj=raw, mode="rb") if gz else raw  # type: ignore[assignment]

    def _more(self) -> bool:
        """Append the next chunk to the buffer (dropping what was consumed); False at EOF."""
        if self._eof:
            return False
        assert self._text is not None and self._raw is not None
        try:
            data = self._text.read(CHUNK)
            text = self._decode.decode(data, final=not data)
        except (OSError, EOFError, zlib.error) as e:
            raise RingtreeError(f"trace {self.path!r} is not readable gzip: {e}") from None
        except UnicodeDecodeError:
            raise RingtreeError(f"trace {self.path!r} is not UTF-8 text (not JSON)") from None
        self._offset += self._pos
        self._buf, self._pos = self._buf[self._pos:] + text, 0
        if self.progress is not None:
            self.progress(self._raw.tell())
        if not data:
            self._eof = True
        return bool(data) or bool(text)

    def _skip_ws(self) -> str:
        """The next non-blank character ("" at EOF), not consumed."""
        while True:
            self._pos = _WS.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                return ""

    def _expect(self, chars: str, what: str) -> str:
        c = self._skip_ws()
        if not c:
            raise self._truncated()
        if c not in chars:
            raise self._malformed(f"expected {what}")
        self._pos += 1
        return c

    def _value(self) -> Any:
        """Decode the JSON value at the cursor (reading more until it is whole)."""
        self._skip_ws()
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as e:
                if len(self._buf) - self._pos > MAX_EVENT_CHARS:
                    raise self._malformed(f"a value over {MAX_EVENT_CHARS} characters "
                                          f"({e.msg})") from None
                at = e.pos - self._pos  # from the value's start, which _more() keeps
                if not self._more():
                    cut = at >= len(self._buf.rstrip()) - self._pos or \
                        e.msg.startswith("Unterminated")
                    raise (self._truncated() if cut else
                           self._malformed(e.msg, self._pos + at)) from None
                continue
            if end < len(self._buf) or not self._more():  # a number may go on in the next chunk
                self._pos = end
                return value

    def _truncated(self) -> RingtreeError:
        return RingtreeError(
            f"trace {self.path!r} is truncated: the JSON ends after {self._offset + len(self._buf)}"
            " characters, inside a value (was the file copied whole?)"
        )

    def _malformed(self, why: str, pos: int | None = None) -> RingtreeError:
        at = self._offset + (self._pos if pos is None else pos)
        return RingtreeError(f"trace {self.path!r} is not valid JSON: {why} at character {at}")

    # -- structure -----------------------------------------------------------------------
    def events(self) -> Iterator[dict[str, Any]]:
        """Every element of ``traceEvents`` that is an object, in file order; the header is
        complete once this is exhausted. RingtreeError as the module doc says."""
        self._open()
        try:
            first = self._skip_ws()
            if first == "[":
                self._pos += 1
                yield from self._array()
            elif first == "{":
                self._pos += 1
                yield from self._object()
            else:
                raise RingtreeError(
                    f"{self.path!r} is not a Kineto trace: it does not start with a JSON object "
                    "or array (torch.profiler's export_chrome_trace writes one)"
                )
            if self._skip_ws():
                raise self._malformed("text after the end of the trace")
        finally:
            assert self._raw is not None
            self._raw.close()

    def _object(self) -> Iterator[dict[str, Any]]:
        found = False
        if self._skip_ws() == "}":
            self._pos += 1
        else:
            while True:
                key = self._value()
                if not isinstance(key, str):
                    raise self._malformed("expected a key")
                self._expect(":", "':'")
                if key == "traceEvents":
                    found = True
                    self._expect("[", "the traceEvents array")
                    yield from self._array()
                else:
                    self.header[key] = self._value()
                if self._expect(",}", "',' or '}'") == "}":
                    break
        if not found:
            keys = ", ".join(list(self.header)[:5]) or "none"
            raise RingtreeError(
                f"{self.path!r} is not a Kineto trace: it has no traceEvents (its keys: {keys}); "
                "write one with torch.profiler's export_chrome_trace"
            )

    def _array(self) -> Iterator[dict[str, Any]]:
        """The elements of an array whose '[' was consumed, up to and with its ']'; a trailing
        comma before ']' (older Chrome traces) is accepted."""
        if self._skip_ws() == "]":
            self._pos += 1
            return
        while True:
            value = self._value()
            if isinstance(value, dict):
                yield value
            if self._expect(",]", "',' or ']'") == "]":
                return
            if self._skip_ws() == "]":
                self._pos += 1
                return
