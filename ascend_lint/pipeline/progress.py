"""Progress of a long run on a terminal: files done / total and the rate, on one line of stderr.

Nothing is drawn for a phase until it has run `DELAY` seconds (short runs print nothing), then the line
is redrawn at most every `EVERY` seconds and erased when the run ends. `Progress.off()` draws nothing:
the faces turn it on only for a terminal (`for_terminal`), never for `-q`, pipes, CI or machine formats.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Optional, TextIO

DELAY = 0.5  # seconds a phase runs before its line is drawn
EVERY = 0.1  # seconds between two redraws
CLEAR = "\r\033[K"


class Progress:
    """`start(label, total)` a phase, `advance()` per file done, `finish()` when the run ends."""

    def __init__(self, stream: Optional[TextIO], clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.label = ""
        self.total = 0
        self.done = 0
        self.started = 0.0
        self.drawn_at = 0.0
        self.shown = False

    @classmethod
    def off(cls) -> "Progress":
        return cls(None)

    @classmethod
    def for_terminal(cls, stream: TextIO, quiet: bool = False, human: bool = True) -> "Progress":
        """Progress on `stream` when it is a terminal, the output is for a person and no CI runs us."""
        isatty = getattr(stream, "isatty", None)
        ci = os.environ.get("CI", "").lower() not in ("", "0", "false")
        wanted = human and not quiet and not ci and isatty is not None and isatty()
        return cls(stream if wanted else None)

    def start(self, label: str, total: int) -> None:
        self.label, self.total, self.done = label, total, 0
        self.started = self.clock()

    def advance(self, count: int = 1) -> None:
        self.done += count
        if self.stream is None:
            return
        now = self.clock()
        if now - self.started < DELAY or now - self.drawn_at < EVERY:
            return
        self.drawn_at = now
        rate = self.done / max(now - self.started, 1e-9)
        self._write(f"{CLEAR}{self.label}: {self.done:,}/{self.total:,} files ({rate:,.0f} files/s)")
        self.shown = True

    def finish(self) -> None:
        """Erase the line, if one was drawn."""
        if self.shown:
            self._write(CLEAR)
            self.shown = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)  # type: ignore[union-attr]
            self.stream.flush()  # type: ignore[union-attr]
        except (OSError, ValueError):  # (a closed terminal: no more progress)
            self.stream = None
