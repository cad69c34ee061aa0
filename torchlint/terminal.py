"""What a person at a terminal gets and a pipe does not: colour, a progress line, wrapped lines.

Conventions (ruff, pytest, https://no-color.org): colour only when the stream is a terminal,
unless `--color always` or `FORCE_COLOR` (non-empty) asks for it; `--color never` or `NO_COLOR`
(non-empty) turns it off, also on a terminal (`NO_COLOR` wins over `FORCE_COLOR`, as in pytest);
`TERM=dumb` has none. The machine formats (JSON, JSON lines, SARIF, GitHub annotations) and files
written with `-o` are never coloured. The progress line goes to stderr, only when stderr is a
terminal and `CI` is unset, for the text formats, once a run has taken about a second; it is
rewritten in place with `\\r` and cleared before the report is printed.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Optional, TextIO

TEXT_FORMATS = ("concise", "full", "grouped")

RESET = "\x1b[0m"
BOLD = "\x1b[1m"
DIM = "\x1b[2m"
RED = "\x1b[31m"
GREEN = "\x1b[32m"
YELLOW = "\x1b[33m"
BLUE = "\x1b[34m"
CYAN = "\x1b[36m"

SEVERITY_COLORS = {"error": RED, "warning": YELLOW, "note": BLUE}


def _set(name: str) -> bool:
    return bool(os.environ.get(name, ""))


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def use_color(choice: Optional[str], stream, format_name: str = "concise", to_file: bool = False) -> bool:
    """Whether to colour what goes to `stream`. `choice`: the `--color` value (None: auto)."""
    if format_name not in TEXT_FORMATS or to_file:
        return False
    if choice == "always":
        return True
    if choice == "never":
        return False
    if _set("NO_COLOR"):
        return False
    if _set("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    return is_terminal(stream)


def paint(text: str, *codes: str, enabled: bool = True) -> str:
    return f"{''.join(codes)}{text}{RESET}" if enabled and codes and text else text


def terminal_width(stream) -> Optional[int]:
    """The width to wrap text to: the terminal's (or $COLUMNS) when `stream` is a terminal; None
    (do not wrap) in a pipe or a file."""
    if not is_terminal(stream):
        return None
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
    return max(columns, 40)


class Progress:
    """`123/2285 files` on stderr, rewritten in place, shown once a run has taken `delay` seconds
    (TORCHLINT_PROGRESS_DELAY overrides the 1 s, for tests) and at most ten times a second."""

    def __init__(self, total: int, stream: TextIO, delay: Optional[float] = None) -> None:
        self.total = total
        self.stream = stream
        if delay is None:
            try:
                delay = float(os.environ.get("TORCHLINT_PROGRESS_DELAY", "1.0"))
            except ValueError:
                delay = 1.0
        self.start = time.monotonic()
        self.delay = delay
        self.done = 0
        self.shown = False
        self._last = 0.0

    def advance(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if now - self.start < self.delay or (self.shown and now - self._last < 0.1 and self.done < self.total):
            return
        self._last = now
        self.shown = True
        try:
            self.stream.write(f"\r{self.done}/{self.total} files")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def clear(self) -> None:
        if self.shown:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self.shown = False


def progress_for(args, total: int) -> Optional[Progress]:
    """A Progress for a run of `total` files, or None where none belongs: stderr not a terminal,
    CI, a machine format, `-q`, a diff or a single file."""
    name = getattr(args, "output_format", None) or os.environ.get("TORCHLINT_OUTPUT_FORMAT") or "concise"
    if total < 2 or name not in TEXT_FORMATS or getattr(args, "quiet", 0) or getattr(args, "diff", False):
        return None
    if in_ci() or not is_terminal(sys.stderr):
        return None
    return Progress(total, sys.stderr)
