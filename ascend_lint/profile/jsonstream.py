"""Stream the events of a Chrome trace file (`trace_view.json`) in bounded memory.

The Ascend profilers write the trace as one JSON array on a single line (torch_npu's
`FileManager.create_json_file_by_path` is `json.dumps(data)`; MindSpore and msprof do the same), so the
file cannot be read line by line. This reader decodes it in chunks: it cuts each chunk after the last
`}, {` between two events, parses the batch with the C decoder, and falls back to one `raw_decode` per
event when the cut falls inside a string. Memory stays at a few chunks whatever the file size. The
Chrome object form (`{"traceEvents": [...], ...}`) is read too.
"""
from __future__ import annotations

import codecs
import json
import re
from typing import IO, Callable, Iterator, List, Optional

CHUNK_CHARS = 1 << 21  # characters decoded per read
MAX_EVENT_CHARS = 1 << 26  # an event longer than this is taken as a corrupt file, not buffered further
_BETWEEN_EVENTS = re.compile(r"\}\s*,\s*\{")
_SPACE = " \t\r\n"
_DECODER = json.JSONDecoder()


class TraceFormatError(Exception):
    """The text is not a JSON array of events (or is cut short); `offset` is in characters."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class _Text:
    """A window on the decoded file: `buf` from character `base` on."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self.buf = ""
        self.base = 0
        self.eof = False
        self.slow_until = -1  # decode one value at a time until `base` passes this offset

    def more(self) -> bool:
        """Append the next chunk; False at the end of the file."""
        if self.eof:
            return False
        data = self._raw.read(CHUNK_CHARS)
        self.eof = not data
        text = self._decode(data, final=self.eof)
        if self.buf:
            self.buf += text
        else:
            self.buf = text
        return bool(text) or not self.eof

    def drop(self, count: int) -> None:
        self.buf = self.buf[count:]
        self.base += count

    def skip_space(self) -> bool:
        """Drop leading whitespace; False when nothing but whitespace is left in the file."""
        while True:
            stripped = self.buf.lstrip(_SPACE)
            self.base += len(self.buf) - len(stripped)
            self.buf = stripped
            if self.buf:
                return True
            if not self.more():
                return False


def iter_trace_events(raw: IO[bytes], on_skip: Optional[Callable[[str], None]] = None) -> Iterator[dict]:
    """Yield every event object of the trace in file order; raise TraceFormatError on broken text.

    Events parsed before the error are yielded first, so a truncated file still gives its complete
    events. Array elements that are not objects are skipped (reported through `on_skip`).
    """
    for batch in iter_trace_batches(raw, on_skip):
        yield from batch


def iter_trace_batches(raw: IO[bytes], on_skip: Optional[Callable[[str], None]] = None) -> Iterator[List[dict]]:
    """`iter_trace_events` in lists of consecutive events (what one decode gave), for tight loops."""
    text = _Text(raw)
    if not text.skip_space():
        raise TraceFormatError("the file is empty", 0)
    if text.buf.startswith("\ufeff"):
        text.drop(1)
        text.skip_space()
    if text.buf[0] == "{":
        _enter_trace_events(text)
    elif text.buf[0] == "[":
        text.drop(1)
    else:
        raise TraceFormatError("expected a JSON array of trace events", text.base)
    yield from _array_batches(text, on_skip)


def _enter_trace_events(text: _Text) -> None:
    """Position `text` just inside the `traceEvents` array of the Chrome object form."""
    text.drop(1)
    while True:
        if not text.skip_space():
            raise TraceFormatError("no traceEvents array in the object", text.base)
        if text.buf[0] == "}":
            raise TraceFormatError("no traceEvents array in the object", text.base)
        if text.buf[0] == ",":
            text.drop(1)
            continue
        key = _decode_one(text)
        if not text.skip_space() or text.buf[0] != ":":
            raise TraceFormatError("expected ':' after an object key", text.base)
        text.drop(1)
        if not text.skip_space():
            raise TraceFormatError("the object is cut short", text.base)
        if key == "traceEvents":
            if text.buf[0] != "[":
                raise TraceFormatError("traceEvents is not an array", text.base)
            text.drop(1)
            return
        _decode_one(text)  # another key's value (displayTimeUnit, metadata): skipped


def _decode_one(text: _Text):
    """Decode the JSON value at the start of the window, reading more text while it is incomplete."""
    while True:
        try:
            value, end = _DECODER.raw_decode(text.buf)
        except ValueError as error:
            if len(text.buf) > MAX_EVENT_CHARS:
                raise TraceFormatError(f"an event longer than {MAX_EVENT_CHARS} characters", text.base) from None
            if not text.more():
                pos = getattr(error, "pos", 0)
                message = getattr(error, "msg", str(error))
                if pos >= len(text.buf.rstrip()) - 1 or message.startswith("Unterminated"):
                    raise TraceFormatError("the file is cut short inside an event", text.base + pos) from None
                raise TraceFormatError(f"invalid JSON ({message})", text.base + pos) from None
            continue
        text.drop(end)
        return value


def _array_batches(text: _Text, on_skip: Optional[Callable[[str], None]]) -> Iterator[List[dict]]:
    """The elements of the array whose '[' was consumed, in batches where the text allows."""
    expect_value = True  # after '[' or ','
    while True:
        if not text.skip_space():
            raise TraceFormatError("the event array is cut short (no closing ']')", text.base)
        head = text.buf[0]
        if head == "]":
            return
        if head == ",":
            if expect_value:
                raise TraceFormatError("unexpected ','", text.base)
            text.drop(1)
            expect_value = True
            continue
        if not expect_value:
            raise TraceFormatError("expected ',' or ']' between events", text.base)
        batch = _take_batch(text) if text.base >= text.slow_until else None
        if batch is None:
            batch = [_decode_one(text)]
            expect_value = False
        else:
            expect_value = True
        events = [item for item in batch if type(item) is dict]
        if len(events) != len(batch) and on_skip is not None:
            for item in batch:
                if type(item) is not dict:
                    on_skip(type(item).__name__)
        if events:
            yield events


def _take_batch(text: _Text) -> Optional[List[object]]:
    """Parse the run of complete events at the start of the window at C speed, consuming their text.

    Returns None when no cut point is found or the cut falls inside a string (the caller then decodes
    one value the slow way). On success the text after the cut starts at the next event.
    """
    if len(text.buf) < CHUNK_CHARS // 2 and not text.eof:
        text.more()
    buf = text.buf
    cut = buf.rfind("}, {")  # json.dumps' separator: the common case, found at memchr speed
    if cut >= 0:
        close, start = cut + 1, cut + 3
    else:
        window = buf[-(1 << 20):] if len(buf) > (1 << 20) else buf
        last = None
        for match in _BETWEEN_EVENTS.finditer(window):
            last = match
        if last is None:
            return None
        offset = len(buf) - len(window)
        close, start = offset + last.start() + 1, offset + last.end() - 1
    if close < 2:
        return None
    try:
        batch = json.loads("[" + buf[:close] + "]")
    except ValueError:
        text.slow_until = text.base + close  # the cut is inside a string: go one event at a time past it
        return None
    text.drop(start)  # the text now starts at the '{' of the next event
    return batch
