"""The user's code as the interpreter runs it: the instructions of a code object (disassembled once
per code object and kept), the instruction a frame stopped at, the lines of a frame's code whose
instructions match, and the frame a torch call came from. The detectors read a statement from here
when no hook says what it does with a value (a result thrown away, a name that holds a module)."""

from __future__ import annotations

import bisect
import dis
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

_TABLES: Dict[Any, Tuple[List[int], List[dis.Instruction]]] = {}


def instructions(code: Any) -> Tuple[List[int], List[dis.Instruction]]:
    """(offsets, instructions) of a code object."""
    table = _TABLES.get(code)
    if table is None:
        found = list(dis.get_instructions(code))
        table = _TABLES[code] = ([i.offset for i in found], found)
    return table


def index_at(code: Any, offset: int) -> int:
    """The index of the instruction at `offset` (a frame's `f_lasti`, which may point into the
    inline cache entries that follow a CALL); -1 before the first."""
    return bisect.bisect_right(instructions(code)[0], offset) - 1


def next_opname(code: Any, offset: int) -> Optional[str]:
    """The name of the instruction after the one at `offset`."""
    index = index_at(code, offset)
    found = instructions(code)[1]
    return found[index + 1].opname if 0 <= index < len(found) - 1 else None


def lines_where(frame: Any, wanted: Callable[[dis.Instruction], bool]) -> Tuple[Tuple[str, int], ...]:
    """The (path, line) of each line of `frame`'s code with an instruction `wanted` accepts."""
    if frame is None:
        return ()
    path = frame.f_code.co_filename
    found: List[Tuple[str, int]] = []
    try:
        for instruction in instructions(frame.f_code)[1]:
            if wanted(instruction):
                positions = getattr(instruction, "positions", None)
                line: Optional[int] = positions.lineno if positions is not None else None
                if line is not None and (path, line) not in found:
                    found.append((path, line))
    except Exception:  # noqa: BLE001
        return ()
    return tuple(found)


def calling_frame(frame: Any) -> Any:
    """The first frame at or above `frame` outside torch and torchlint: the code that made the call
    a TorchFunctionMode handler sees."""
    while frame is not None and frame.f_code.co_filename.startswith((_TORCH_DIR, _OWN_DIR)):
        frame = frame.f_back
    return frame
