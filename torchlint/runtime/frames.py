"""Frames in the user's files: where a runtime finding is reported, and the failure traceback
trimmed to the user's own frames."""

from __future__ import annotations

import linecache
import sys
import traceback
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Callable, List, Optional, Tuple

from torchlint.runtime.project import display_path


@dataclass(frozen=True)
class Site:
    """A place in the user's source: the innermost user frame, and the user frames around it
    (innermost first), which a static finding anywhere on that stack can be matched against."""

    path: str  # absolute
    line: int
    function: str
    stack: Tuple[Tuple[str, int], ...] = ()
    # 1-based column of the expression an exception was raised at, when it comes from a traceback
    # (Python 3.11+ records each instruction's source position): of two `x.data[0]` in one
    # statement, the one that raised.
    column: Optional[int] = None

    @property
    def where(self) -> str:
        return f"{display_path(self.path)}:{self.line}"


class UserFrames:
    def __init__(self, is_user_file: Callable[[str], bool]) -> None:
        self.is_user_file = is_user_file

    def innermost(self, frame: Optional[FrameType] = None) -> Optional[FrameType]:
        frame = sys._getframe(1) if frame is None else frame
        is_user = self.is_user_file
        while frame is not None:
            if is_user(frame.f_code.co_filename):
                return frame
            frame = frame.f_back
        return None

    def site(self, frame: Optional[FrameType] = None, depth: int = 12) -> Optional[Site]:
        """The innermost user frame at or above `frame` (default: the caller), with the user
        frames above it."""
        frame = self.innermost(sys._getframe(1) if frame is None else frame)
        if frame is None:
            return None
        stack = []
        current: Optional[FrameType] = frame
        while current is not None and len(stack) < depth:
            if self.is_user_file(current.f_code.co_filename):
                stack.append((current.f_code.co_filename, current.f_lineno))
            current = current.f_back
        return Site(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, tuple(stack))

    def site_of_traceback(self, tb: Optional[TracebackType]) -> Optional[Site]:
        """The innermost user frame of an exception's traceback (where it left the user's code),
        with every user frame of the traceback, innermost first."""
        user = self._user_entries(tb)
        if not user:
            return None
        innermost = user[-1]
        frame, line = innermost.tb_frame, innermost.tb_lineno
        stack = tuple((t.tb_frame.f_code.co_filename, t.tb_lineno) for t in reversed(user))
        return Site(frame.f_code.co_filename, line, frame.f_code.co_name, stack, column=_raised_at(innermost, line))

    def innermost_of_traceback(self, tb: Optional[TracebackType]) -> Optional[FrameType]:
        """The innermost user frame of an exception's traceback (its locals as they were)."""
        user = self._user_entries(tb)
        return user[-1].tb_frame if user else None

    def _user_entries(self, tb: Optional[TracebackType]) -> List[TracebackType]:
        return [t for t in _walk(tb) if self.is_user_file(t.tb_frame.f_code.co_filename)]

    def trimmed_traceback(self, error: BaseException) -> str:
        """The traceback as Python prints it, keeping only frames in the user's files."""
        lines = ["Traceback (most recent call last; frames outside your files left out):"]
        hidden = 0
        for frame, line in ((t.tb_frame, t.tb_lineno) for t in _walk(error.__traceback__)):
            filename = frame.f_code.co_filename
            if not self.is_user_file(filename):
                hidden += 1
                continue
            lines.append(f'  File "{display_path(filename)}", line {line}, in {frame.f_code.co_name}')
            text = linecache.getline(filename, line).strip()
            if text:
                lines.append(f"    {text}")
        if len(lines) == 1:
            lines[0] = "Traceback (no frame in your files):"
        lines.extend(line.rstrip("\n") for line in traceback.format_exception_only(type(error), error))
        return "\n".join(lines)


def _raised_at(tb: TracebackType, line: int) -> Optional[int]:
    """The 1-based character column where the instruction `tb` stopped at starts on `line` (the
    positions table of Python 3.11+; None before, or when the instruction spans other lines)."""
    positions = getattr(tb.tb_frame.f_code, "co_positions", None)
    if positions is None or tb.tb_lasti < 0:
        return None
    try:
        start_line, _, start_column, _ = list(positions())[tb.tb_lasti // 2]
    except (IndexError, ValueError):
        return None
    if start_line != line or start_column is None:
        return None
    text = linecache.getline(tb.tb_frame.f_code.co_filename, line)
    # the table counts UTF-8 bytes; findings count characters
    return len(text.encode("utf-8")[:start_column].decode("utf-8", errors="ignore")) + 1


def _walk(tb: Optional[TracebackType]) -> List[TracebackType]:
    items = []
    while tb is not None:
        items.append(tb)
        tb = tb.tb_next
    return items


def caller_of_module_call(frame: Optional[FrameType]) -> Optional[FrameType]:
    """The frame that called `module(...)`, from a frame inside a forward hook: the first frame
    above nn.Module's own `_call_impl` / `_wrapped_call_impl`."""
    while frame is not None and frame.f_code.co_name not in ("_call_impl", "_wrapped_call_impl"):
        frame = frame.f_back
    while frame is not None and frame.f_code.co_name in ("_call_impl", "_wrapped_call_impl"):
        frame = frame.f_back
    return frame
