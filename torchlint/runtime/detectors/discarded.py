"""TL110: an out-of-place torch operation whose result the user's code throws away
(`x.to(device)`, `x.float()`, `F.dropout(h, 0.5, True)` as a statement).

The TorchFunctionMode hands the call to `check` after it ran. The call counts when the user's
frame made it directly (the frames between are torch's own) and the instruction after that
frame's call is `POP_TOP`: Python discards the value, so the statement was the call alone. Only a
result that is a new tensor counts (`x.to(device)` on the device `x` is already on returns `x`
itself: nothing was lost).
"""

from __future__ import annotations

from typing import Any

import torch

from torchlint.analysis import torch_api as api
from torchlint.analysis.out_of_place import DEVICE_AND_DTYPE_MOVES, OUT_OF_PLACE_FUNCTIONAL
from torchlint.runtime import bytecode

# Tensor methods checked at run time: the moves and casts, transposes and reshapes (the element-wise
# methods go through the session's arithmetic handler and stay out of this cheap path).
METHODS = DEVICE_AND_DTYPE_MOVES | api.TRANSPOSING | api.RESHAPING | frozenset({"view", "clone", "detach"})
FUNCTIONAL = frozenset(n for n in OUT_OF_PLACE_FUNCTIONAL if "dropout" in n) | frozenset({"relu", "softmax"})


def applies(func: Any) -> bool:
    name = getattr(func, "__name__", "")
    module = getattr(func, "__module__", "") or ""
    if module == "torch.nn.functional":
        return name in FUNCTIONAL
    return name in METHODS and getattr(func, "__qualname__", "") in (f"TensorBase.{name}", f"Tensor.{name}")


class Discarded:
    def __init__(self, session) -> None:
        self.session = session

    def check(self, func: Any, args: tuple, kwargs: dict, output: Any, frame: Any) -> None:
        if not isinstance(output, torch.Tensor) or not args or output is args[0]:
            return
        if kwargs.get("out") is not None or kwargs.get("inplace"):
            return
        frame = bytecode.calling_frame(frame)
        if frame is None or not self.session.frames.is_user_file(frame.f_code.co_filename):
            return
        if bytecode.next_opname(frame.f_code, frame.f_lasti) != "POP_TOP":
            return
        site = self.session.frames.site(frame)
        name = getattr(func, "__name__", "?")
        receiver = args[0]
        shown = f"`F.{name}(...)`" if (getattr(func, "__module__", "") or "") == "torch.nn.functional" \
            else f"`.{name}(...)`"
        change = []
        if isinstance(receiver, torch.Tensor):
            if receiver.device != output.device:
                change.append(f"the result is on {output.device}, the tensor stays on {receiver.device}")
            if receiver.dtype != output.dtype:
                change.append(f"the result is {output.dtype}, the tensor stays {receiver.dtype}")
            if receiver.shape != output.shape:
                change.append(f"the result has shape {tuple(output.shape)}, the tensor {tuple(receiver.shape)}")
            elif "dropout" in name and output.numel():
                zeroed = int((output == 0).sum()) - int((receiver == 0).sum())
                change.append(f"the result has {zeroed} of {output.numel()} elements zeroed, the tensor none")
        self.session.observe(
            "TL110", site,
            f"{shown} returns a new tensor and the statement throws it away: the tensor is unchanged; assign "
            "the result",
            f"the value of {shown} was discarded (the next instruction is POP_TOP)"
            + (f"; {'; '.join(change)}" if change else ""))
