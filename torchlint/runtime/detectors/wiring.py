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

TL135: at a step (without closure) of an optimizer none of whose parameters backward reached
since the previous step (the gradient tensor hooks of detectors/gradients.py), every parameter
that requires grad has `.grad` None or all zero: no backward ran since `zero_grad()`, and the
step applies no gradient. Reported once per optimizer. Gradient accumulation (backward at every
step, zero_grad every k) always reaches the parameters, so the check stops at the first one; only
a step no backward reached (and the first step, before the hooks exist) reads the gradients.

TL133: the ids of the modules called in the first three steps are collected
(`session.modules_ran`: a set add per call, off after the check). At the third step of an
optimizer, a registered submodule of a root module whose parameters require grad and are held by
that optimizer, whose forward never ran and whose parameters' `.grad` are all None, is reported
(the outermost such submodule only) at the line of its parent's `__init__` that assigned it. A
frozen unused layer (requires_grad False) is not.

TL123: `F.dropout` (and its 1d/2d/3d/alpha variants), seen by the TorchFunctionMode only (its
handler is chosen once per function), called inside a forward with training=True (passed or by
default) while the root module of that forward is in eval mode: reported once per line. The same
for a Dropout module in training mode called inside such a forward (the forward pre-hook) that is
no submodule of the root: built in `forward`, so `eval()` never reached it; the lines of the
calling frame that bound it (`drop = nn.Dropout(p)`) are related lines. A registered Dropout
switched back to `train()` (Monte Carlo dropout) is a submodule, and is not reported. Every
dropout seen in an evaluation is a watched line: only there can a static TL123 have run without
harm.

Neither hook sees the line that built the optimizer or called `eval()`; each observation names
the lines of the stepping frame that could have (the assignments of the name the optimizer is
bound to, the `.eval` attribute loads), read from its bytecode, as related lines.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, Dict, List, Tuple

from torchlint.runtime import bytecode, project
from torchlint.runtime.frames import Site

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
        self._reported_135: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.root: Any = None  # weak reference to the root module of the latest forward (TL123)
        self._reported_123: set = set()

    # -- hooks -------------------------------------------------------------------------------------
    def root_call(self, module: Any, grad: bool) -> None:
        if grad and len(self._calls) < 64:
            try:
                self._calls.append((weakref.ref(module), bool(module.training)))
            except TypeError:
                pass

    def before_step(self, optimizer: Any, frame: Any) -> None:
        if self.session.step_of(optimizer) == 0:
            self._typo_frozen(optimizer, frame)
        self._optimizer_reset(optimizer, frame)
        self._eval_left_on(optimizer, frame)
        self._no_gradient(optimizer, frame)

    def after_step(self, optimizer: Any, frame: Any = None) -> None:
        self._calls.clear()
        ran = self.session.modules_ran
        if ran is not None and self.session.step_of(optimizer) >= UNUSED_AFTER:
            self.session.modules_ran = None  # the module calls are no longer collected
            self._unused_layers(optimizer, frame, ran)
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

    # -- TL123 -------------------------------------------------------------------------------------
    def dropout_call(self, args: tuple, kwargs: dict) -> None:
        training = kwargs["training"] if "training" in kwargs else (args[2] if len(args) > 2 else True)
        if training is not True:
            root = self.root() if self.root is not None else None
            if root is not None and not getattr(root, "training", True):
                site = self.session.site()
                if site is not None:  # `training=self.training` in an evaluation: ran without harm
                    self.session.watch("TL123", ((site.path, site.line),))
            return
        root = self.root() if self.root is not None else None
        if root is None or getattr(root, "training", True):
            return
        site = self.session.site()
        if site is None:
            return
        self.session.watch("TL123", ((site.path, site.line),))
        if (site.path, site.line) in self._reported_123:
            return
        self._reported_123.add((site.path, site.line))
        name = type(root).__name__
        self.session.observe(
            "TL123", site,
            f"dropout runs with `training=True` inside `{name}`'s forward although `{name}` is in eval(): the "
            f"evaluation drops activations at random; pass `training=self.training` (or use an `nn.Dropout` "
            f"built in `__init__`)",
            f"a forward of `{name}` with `{name}.training == False` called dropout with training=True "
            f"(p={kwargs.get('p', args[1] if len(args) > 1 else 0.5)})")

    def dropout_module(self, module: Any, frame: Any) -> None:
        """A Dropout module in training mode called inside a forward: one built in that forward
        (no submodule of the root) while the root is in eval() drops activations in the evaluation.
        A registered Dropout switched back to train() on purpose (Monte Carlo dropout) is left alone."""
        root = self.root() if self.root is not None else None
        if root is None or getattr(root, "training", True) or frame is None:
            return
        site = self.session.frames.site(frame)
        if site is None:
            return
        built = _store_lines(frame, module)
        self.session.watch("TL123", ((site.path, site.line),) + built)
        if (site.path, site.line) in self._reported_123 or any(m is module for m in root.modules()):
            return
        self._reported_123.add((site.path, site.line))
        name, kind = type(root).__name__, type(module).__name__
        self.session.observe(
            "TL123", site,
            f"an `nn.{kind}` built inside `{name}`'s forward is a new module in training mode on every call: "
            f"`{name}.eval()` never reaches it, so the evaluation drops activations at random; build it in "
            f"`__init__` (or call `F.dropout(x, p, training=self.training)`)",
            f"a forward of `{name}` with `{name}.training == False` called an `nn.{kind}` (p={module.p}) in training "
            f"mode that is not a submodule of `{name}`",
            related=built)

    # -- TL120 -------------------------------------------------------------------------------------
    def _typo_frozen(self, optimizer: Any, frame: Any) -> None:
        """At an optimizer's first step: parameters it holds that carry a Python attribute
        `require_grad` set to False (or whose module does) and still require grad and got one."""
        marked: Dict[int, Any] = {}  # parameters with the attribute, on them or on their module
        for root in list(self.session._roots.values()):
            for module in root.modules():
                if vars(module).get("require_grad") is False:
                    marked.update((id(p), p) for p in module.parameters())
            marked.update((id(p), p) for p in root.parameters() if vars(p).get("require_grad") is False)
        held = [p for group in optimizer.param_groups for p in group["params"]]
        marked.update((id(p), p) for p in held if vars(p).get("require_grad") is False)
        if not marked:
            return
        typo = [p for p in held if id(p) in marked and p.requires_grad and p.grad is not None]
        if not typo:
            # seen, and harmless: nothing it marks trains
            self.session.watch("TL120", self.session.lines_matching(_TYPO_ASSIGNMENT))
            return
        lines = self.session.lines_matching(_TYPO_ASSIGNMENT)
        self.session.watch("TL120", lines)
        site = self.session.frames.site(frame)
        if site is None:
            return
        names = [self.session.param_name(p) for p in typo]
        shown = ", ".join(f"`{n}`" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        count = sum(p.numel() for p in typo)
        self.session.observe(
            "TL120", site,
            "`require_grad = False` set an attribute torch never reads: the parameters meant to be frozen still "
            "require grad and train; write `requires_grad = False` (or call `.requires_grad_(False)`)",
            f"at the first step of `{type(optimizer).__name__}`, {len(typo)} parameters with `require_grad = False` "
            f"({shown}; {count:,} weights) still have requires_grad True and a gradient, which this step applies",
            related=lines)

    # -- TL135 -------------------------------------------------------------------------------------
    def _no_gradient(self, optimizer: Any, frame: Any) -> None:
        try:
            if optimizer in self._reported_135:
                return
        except TypeError:
            return
        states = self.session.gradients._params
        trained: List[Any] = []
        for group in optimizer.param_groups:
            for param in group["params"]:
                state = states.get(id(param))
                if state is not None and state.accumulated:
                    return  # backward reached it since the last step
                if getattr(param, "requires_grad", False):
                    trained.append(param)
        if not trained:
            return
        none = zero = 0
        for param in trained:
            grad = param.grad
            if grad is None:
                none += 1
            elif grad.is_meta or grad.is_sparse or bool(grad.any()):
                return  # a meta tensor holds no values to read
            else:
                zero += 1
        self._reported_135.add(optimizer)
        site = self.session.frames.site(frame)
        if site is None:
            return
        name = type(optimizer).__name__
        step = self.session.step_of(optimizer) + 1
        cleared = (f"{none} with .grad None" if none else "") + (" and " if none and zero else "") + \
            (f"{zero} with an all-zero .grad" if zero else "")
        self.session.observe(
            "TL135", site,
            f"`{name}.step()` applies no gradient: no backward ran since the gradients were cleared, so the "
            f"parameters it holds do not train; call `.backward()` on the loss before the step",
            f"step {step} of `{name}`: none of its {len(trained)} trainable parameters got a gradient since "
            f"the previous step ({cleared})",
            related=_attribute_lines(frame, "zero_grad"))

    # -- TL133 -------------------------------------------------------------------------------------
    def _unused_layers(self, optimizer: Any, frame: Any, ran: set) -> None:
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        found: List[Tuple[Any, str, Any, str]] = []  # (parent, attribute, module, dotted name)

        def walk(parent: Any, prefix: str) -> None:
            for attribute, child in parent._modules.items():
                if child is None:
                    continue
                dotted = f"{prefix}{attribute}"
                if id(child) not in ran:
                    trained = [p for p in child.parameters() if p.requires_grad]
                    if trained and all(id(p) in held and p.grad is None for p in trained):
                        found.append((parent, attribute, child, dotted))
                        continue
                walk(child, dotted + ".")

        roots = list(self.session._roots.values())
        for root in roots:
            if id(root) in ran and any(id(p) in held for p in root.parameters()):
                walk(root, "")
        steps = self.session.step_of(optimizer)
        for parent, attribute, child, dotted in found:
            lines = [found for found in project.attribute_lines(type(parent), attribute, methods=["__init__"])
                     if self.session.frames.is_user_file(found[0])]
            if lines:
                path, line = lines[0]
                site = Site(path, line, "__init__", ((path, line),))
            else:
                site = self.session.frames.site(frame)
            if site is None:
                continue
            count = sum(p.numel() for p in child.parameters() if p.requires_grad)
            kind = type(child).__name__
            observation = self.session.observe(
                "TL133", site,
                f"`{dotted}` ({kind}) is built and handed to the optimizer but its forward never runs: its "
                f"weights never train; apply it in `forward` or remove it",
                f"in the first {steps} steps of `{type(optimizer).__name__}`, `{type(parent).__name__}.{attribute}` "
                f"({kind}, {count} trainable weights) was never called and its parameters' .grad stayed None",
                related=tuple(lines[1:]))
            if observation is not None and \
                    _read_outside_init(type(parent), attribute, self.session.frames.is_user_file):
                # a layer the class's methods do use (`if self.do_bn: x = self.bn_input(x)`): unused in this
                # configuration, by choice; evidence only where the static rule found it unused
                observation.confirms_only = True

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


UNUSED_AFTER = 3  # TL133: steps after which a layer never called is reported
_TYPO_ASSIGNMENT = re.compile(r"\.require_grad\s*=\s*False\b")


def _read_outside_init(cls: type, attribute: str, is_user_file) -> bool:
    """Whether a method of the user's class (along the MRO), other than `__init__`, reads
    `self.<attribute>` (nested functions and comprehensions included)."""
    def reads(code: Any) -> bool:
        for instruction in bytecode.instructions(code)[1]:
            if instruction.opname in _ATTRIBUTE_LOADS and instruction.argval == attribute:
                return True
        return any(reads(const) for const in code.co_consts if hasattr(const, "co_code"))

    for klass in getattr(cls, "__mro__", ()):
        for name, value in vars(klass).items():
            function = getattr(value, "__func__", value)
            code = getattr(function, "__code__", None)
            if name == "__init__" or code is None or not is_user_file(code.co_filename):
                continue
            try:
                if reads(code):
                    return True
            except Exception:  # noqa: BLE001
                continue
    return False


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
    return bytecode.lines_where(frame, lambda i: i.opname in _STORES and i.argval in names) if names else ()


def _attribute_lines(frame: Any, attribute: str) -> Tuple[Tuple[str, int], ...]:
    return bytecode.lines_where(frame, lambda i: i.opname in _ATTRIBUTE_LOADS and i.argval == attribute)
