"""TL125 (an optimizer with state built anew for every step) and TL134 (`model.eval()` left on in
the training loop), seen through the global optimizer step hooks and the root module calls.

TL125: every optimizer step is keyed by the parameters it updates. A step by an optimizer instance
never seen before, for the same parameters as the previous step, whose previous instance stepped
exactly once and kept state (a tensor in `optimizer.state`: Adam's moments, the momentum buffer;
plain SGD keeps none) is a reset. The second such reset in a row is reported: an optimizer
rebuilt once per epoch steps many times before it is replaced, and is not.

TL134: a root module call from the user's code with autograd on is remembered with the module's
mode until the next step. A step whose optimizer holds parameters of a module with Dropout or
BatchNorm whose every call since the last step ran in eval mode, when that module stepped in training mode
before, is reported once per module: training switched to inference behaviour mid-run. A model
put in eval mode before training on purpose (a frozen BatchNorm) never stepped in training mode,
and is not.

Neither hook sees the line that built the optimizer or called `eval()`; each observation names
the lines of the stepping frame that could have (the assignments of the name the optimizer is
bound to, the `.eval` attribute loads), read from its bytecode, as related lines.
"""

from __future__ import annotations

import dis
import weakref
from typing import Any, Dict, List, Optional, Tuple

_STORES = frozenset({"STORE_NAME", "STORE_FAST", "STORE_GLOBAL", "STORE_DEREF"})
_ATTRIBUTE_LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})


class Wiring:
    def __init__(self, session) -> None:
        self.session = session
        self._seen: "weakref.WeakSet[Any]" = weakref.WeakSet()
        # parameter ids of a step -> (weak reference to the last instance, its steps, it kept state,
        # resets in a row)
        self._last: Dict[Tuple[int, ...], Tuple[Any, int, bool, int]] = {}
        self._reported_125: set = set()
        # root module calls since the last step: (weak reference, training, has Dropout/BatchNorm)
        self._calls: List[Tuple[Any, bool]] = []
        self._trained: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._reported_134: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._mode_layers: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()

    # -- hooks -------------------------------------------------------------------------------------
    def root_call(self, module: Any, grad: bool) -> None:
        if grad and len(self._calls) < 64:
            try:
                self._calls.append((weakref.ref(module), bool(module.training)))
            except TypeError:
                pass

    def before_step(self, optimizer: Any, frame: Any) -> None:
        self._optimizer_reset(optimizer, frame)
        self._eval_left_on(optimizer, frame)

    def after_step(self, optimizer: Any) -> None:
        self._calls.clear()
        key = _key(optimizer)
        reference, steps, _, resets = self._last.get(key, (None, 0, False, 0))
        same = reference is not None and reference() is optimizer
        try:
            self._last[key] = (reference if same else weakref.ref(optimizer), steps + 1 if same else 1,
                               _kept_state(optimizer), resets)
        except TypeError:
            pass

    # -- TL125 -------------------------------------------------------------------------------------
    def _optimizer_reset(self, optimizer: Any, frame: Any) -> None:
        try:
            fresh = optimizer not in self._seen
            self._seen.add(optimizer)
        except TypeError:
            return
        if not fresh:
            return
        key = _key(optimizer)
        previous = self._last.get(key)
        if previous is None:
            return
        reference, steps, kept, resets = previous
        if not kept or steps != 1 or optimizer.state:
            self._last[key] = (reference, steps, kept, 0)
            return
        resets += 1
        self._last[key] = (reference, steps, kept, resets)
        if resets < 2 or key in self._reported_125:
            return
        self._reported_125.add(key)
        site = self.session.frames.site(frame)
        if site is None:
            return
        name = type(optimizer).__name__
        self.session.observe(
            "TL125", site,
            f"a new `{name}` steps the same parameters at every step: its state (moment estimates, momentum) "
            f"starts empty each time, so every update is a first step; build the optimizer once before the loop",
            f"{resets + 1} `{name}` instances in a row each made a single step for the same "
            f"{sum(len(g['params']) for g in optimizer.param_groups)} parameters, each starting with an empty "
            f"state (the previous one had kept its state for the next step)",
            related=_store_lines(frame, optimizer))

    # -- TL134 -------------------------------------------------------------------------------------
    def _eval_left_on(self, optimizer: Any, frame: Any) -> None:
        if not self._calls:
            return
        held = None
        modes: Dict[int, Tuple[Any, bool]] = {}  # module -> (module, every call in eval mode)
        for reference, training in self._calls:
            module = reference()
            if module is None:
                continue
            _, evaluating = modes.get(id(module), (module, True))
            modes[id(module)] = (module, evaluating and not training)
        for module, evaluating in modes.values():
            if not self._has_mode_layers(module):
                continue
            if held is None:
                held = {id(p) for group in optimizer.param_groups for p in group["params"]}
            if not any(id(p) in held for p in module.parameters()):
                continue
            if not evaluating:
                self._trained.add(module)
                continue
            if module not in self._trained or module in self._reported_134:
                continue
            self._reported_134.add(module)
            site = self.session.frames.site(frame)
            if site is None:
                return
            name = type(module).__name__
            self.session.observe(
                "TL134", site,
                f"`{name}` was switched to eval() during training and trains on in evaluation mode: Dropout is off "
                f"and BatchNorm uses its running statistics; call `.train()` after the evaluation",
                f"this step (step {self.session.step_of(optimizer) + 1} of `{type(optimizer).__name__}`) follows a "
                f"forward of `{name}` with `training == False` and autograd on, after earlier steps in training "
                f"mode",
                related=_attribute_lines(frame, "eval"))

    def _has_mode_layers(self, module: Any) -> bool:
        try:
            found = self._mode_layers.get(module)
        except TypeError:
            return False
        if found is None:
            import torch.nn as nn

            kinds = (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm)
            found = any(isinstance(m, kinds) for m in module.modules())
            self._mode_layers[module] = found
        return found


def _key(optimizer: Any) -> Tuple[int, ...]:
    return tuple(id(p) for group in optimizer.param_groups for p in group["params"])


def _kept_state(optimizer: Any) -> bool:
    import torch

    for state in optimizer.state.values():
        if any(isinstance(value, torch.Tensor) for value in state.values()):
            return True
    return False


def _store_lines(frame: Any, value: Any) -> Tuple[Tuple[str, int], ...]:
    """The lines of `frame`'s code that store into a name now bound to `value`."""
    if frame is None:
        return ()
    names = {name for name, bound in frame.f_locals.items() if bound is value}
    return _lines(frame, lambda i: i.opname in _STORES and i.argval in names) if names else ()


def _attribute_lines(frame: Any, attribute: str) -> Tuple[Tuple[str, int], ...]:
    return _lines(frame, lambda i: i.opname in _ATTRIBUTE_LOADS and i.argval == attribute)


def _lines(frame: Any, wanted) -> Tuple[Tuple[str, int], ...]:
    if frame is None:
        return ()
    path = frame.f_code.co_filename
    found: List[Tuple[str, int]] = []
    try:
        for instruction in dis.get_instructions(frame.f_code):
            if wanted(instruction):
                positions = getattr(instruction, "positions", None)
                line: Optional[int] = positions.lineno if positions is not None else None
                if line is not None and (path, line) not in found:
                    found.append((path, line))
    except Exception:  # noqa: BLE001
        return ()
    return tuple(found)
