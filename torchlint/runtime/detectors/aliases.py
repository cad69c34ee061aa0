"""TL127: an in-place shape change (`t_`, `transpose_`, `squeeze_`, `unsqueeze_`, `resize_`, ...)
applied to a temporary alias (`x.data.t_()`, `x.detach().unsqueeze_(0)`) that the statement then
throws away: the alias is a new tensor object sharing the storage, so the new shape lives and dies
with it and `x` keeps its old one.

The TorchFunctionMode hands every such call to `check` with the tensor's shape and strides from
before it. The user's frame is read from its bytecode: the method is called on the result of a
`.data` load or of a `.detach()` call, and the value is discarded (the next instruction is
`POP_TOP`, or the calls of the line build a tuple that is). Only a call that changed the alias's
shape or strides is harm (`squeeze_()` of a tensor without a size-1 dimension changes nothing);
every such line is one the run watched.
"""

from __future__ import annotations

import dis
from typing import Any, List, Optional, Tuple

import torch

from torchlint.runtime import bytecode

SHAPE_IN_PLACE = frozenset({"t_", "transpose_", "swapdims_", "swapaxes_", "squeeze_", "unsqueeze_", "resize_",
                            "resize_as_", "as_strided_"})
_LOADS = frozenset({"LOAD_FAST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF"})


class Aliases:
    def __init__(self, session) -> None:
        self.session = session

    def check(self, name: str, alias: Any, before: Tuple[Tuple[int, ...], Tuple[int, ...]], frame: Any) -> None:
        frame = bytecode.calling_frame(frame)
        if frame is None or not self.session.frames.is_user_file(frame.f_code.co_filename):
            return
        instructions = bytecode.instructions(frame.f_code)[1]
        call = bytecode.index_at(frame.f_code, frame.f_lasti)
        if call < 0 or not instructions[call].opname.startswith("CALL"):
            return
        receiver = _receiver(instructions, call, name)
        if receiver is None or not _discarded(instructions, call):
            return
        how, base_name = receiver
        site = self.session.frames.site(frame)
        if site is None:
            return
        self.session.watch("TL127", ((site.path, site.line),))
        after = (tuple(alias.shape), tuple(alias.stride()))
        if after == before:
            return  # nothing changed (`squeeze_()` without a size-1 dimension)
        base = _resolve(frame, base_name) if base_name else None
        shown = f"`{base_name}{how}.{name}(...)`" if base_name else f"`...{how}.{name}(...)`"
        kept = ""
        if isinstance(base, torch.Tensor):
            kept = f"; `{base_name}` is still {_shape(base.shape)}"
            if tuple(base.shape) == after[0] and tuple(base.stride()) == before[1]:
                kept += " with its old strides (its elements are not transposed)"
        self.session.observe(
            "TL127", site,
            f"`{how}` returns a new tensor object: the in-place `{name}` changes that temporary alias, which the "
            f"statement throws away, and the original keeps its shape; assign the result "
            f"(`x = x.{name.rstrip('_')}(...)`)",
            f"{shown} changed a temporary alias from {_shape(before[0])} (strides {before[1]}) to "
            f"{_shape(after[0])} (strides {after[1]}) and the statement discarded it{kept}")


def _receiver(instructions: List[dis.Instruction], call: int, name: str) -> Optional[Tuple[str, Optional[str]]]:
    """(".data" or ".detach()", the name it was read from if a plain name) when the method called at
    `call` is called on the result of a `.data` load or a `.detach()` call; else None."""
    index = call - 1
    while index >= 0 and not (instructions[index].opname in ("LOAD_METHOD", "LOAD_ATTR")
                              and instructions[index].argval == name):
        if instructions[index].starts_line is not None:
            return None
        index -= 1
    if index <= 0:
        return None
    before = instructions[index - 1]
    if before.opname == "LOAD_ATTR" and before.argval == "data":
        how, source = ".data", index - 2
    elif before.opname == "CALL" and before.arg == 0:
        load = index - 2
        if load >= 0 and instructions[load].opname == "PRECALL":
            load -= 1
        if load < 0 or instructions[load].opname not in ("LOAD_METHOD", "LOAD_ATTR") \
                or instructions[load].argval != "detach":
            return None
        how, source = ".detach()", load - 1
    else:
        return None
    dotted: List[str] = []
    while source >= 0 and instructions[source].opname == "LOAD_ATTR":
        dotted.insert(0, str(instructions[source].argval))
        source -= 1
    if source < 0 or instructions[source].opname not in _LOADS:
        return how, None
    return how, ".".join([str(instructions[source].argval)] + dotted)


def _resolve(frame: Any, dotted: str) -> Any:
    first, *rest = dotted.split(".")
    value = frame.f_locals.get(first, frame.f_globals.get(first))
    for attribute in rest:  # through modules only: another object's attribute may be a property that runs code
        if not isinstance(value, torch.nn.Module):
            return None
        value = getattr(value, attribute, None)
    return value


def _discarded(instructions: List[dis.Instruction], call: int) -> bool:
    """The call's value is thrown away: POP_TOP next, or a tuple of the line's calls that is."""
    following = instructions[call + 1] if call + 1 < len(instructions) else None
    if following is None:
        return False
    if following.opname == "POP_TOP":
        return True
    for index in range(call + 1, len(instructions)):
        instruction = instructions[index]
        if instruction.starts_line is not None or instruction.opname.startswith(("STORE", "RETURN", "YIELD")):
            return False
        if instruction.opname == "BUILD_TUPLE":
            return index + 1 < len(instructions) and instructions[index + 1].opname == "POP_TOP"
    return False


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
