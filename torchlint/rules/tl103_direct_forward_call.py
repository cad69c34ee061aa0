"""TL103: `module.forward(x)` called directly skips hooks."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.semantic import Semantic, method_call
from torchlint.finding import Applicability, Severity
from torchlint.analysis.value import MODULE
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

class DirectForwardCall(Rule):
    code = "TL103"
    name = "direct-forward-call"
    summary = "`module.forward(x)` called directly skips forward hooks; call `module(x)`"
    fix_availability = "always"
    triggers = (".forward",)
    node_types = (cst.Call,)
    called_names = frozenset(("forward",))  # check returns at once for any other call
    confirmation_module = "tl103"
    severity_docs = """
A **note** when no hook is registered anywhere in the file: calling `forward`
directly skips hooks, but there are none, so nothing changes today. A **warning** when the file
registers a hook (`register_forward_hook`, `register_forward_pre_hook`, ...) or uses a torch
utility that works through one (`nn.utils.spectral_norm`, `weight_norm`, `prune`) on the module
itself (or on something that may be it): those hooks are skipped and the results differ. A
**note** when every hook is on one of its submodules (`net.layer4.register_forward_hook(...)`,
`spectral_norm(net.conv)`): `net.forward(x)` still calls `self.layer4(...)`, whose hooks fire
(measured on torch 2.13), so nothing changes today.
"""
    docs = """
## What it does
Flags `m.forward(...)` where `m` is certainly an `nn.Module` instance: a module built in this
file (`model = Net()`, `self.net = nn.Sequential(...)`), or a parameter annotated as
`nn.Module` (also when stored as `self.net = net` in `__init__`).

## Why is this bad?
`module(x)` goes through `nn.Module.__call__`, which runs forward pre-hooks, forward hooks and
backward hooks around `forward`. Calling `forward` directly skips all of them: feature
extraction hooks record nothing, pruning/quantization/`torch.utils.hooks` based tools and
FSDP/DDP wrappers that rely on hooks silently stop working. Measured on torch 2.13 by the
confirmation case: `model.forward(x)` three times — forward ran 3×, its forward hooks fired 0×.

## Example
```python
features = []
model.layer4.register_forward_hook(lambda m, i, o: features.append(o))
out = model.forward(x)
```

Use instead:
```python
out = model(x)
```

## Fix safety
The fix replaces `m.forward(args)` with `m(args)`. It is unsafe: hooks that were skipped now run,
which changes behaviour wherever hooks are registered (that is the point, but it is a change).
Not flagged: `super().forward(...)` and `nn.Module.forward(self, ...)` / `Base.forward(self, ...)`
inside an override (calling the parent implementation is how overriding works),
`self.forward(...)` inside the module itself, and receivers not known to be modules.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.forward
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_forward_hook
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        if not method_call(node, "forward"):
            return
        receiver = node.func.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            return
        sem = ctx.semantic
        if not _is_module_instance(receiver, sem):
            return
        spelled = ctx.code(receiver)
        hook = _registers_hooks(sem, spelled)
        below = _registers_hooks(sem, None) if hook is None else None
        if hook is None and below is not None:
            skipped = (f"skips the forward hooks of `{ctx.short(receiver, 30)}` itself; the hooks this file "
                       f"registers are on its submodules (`{ctx.short(below, 40)}`) and still fire, so "
                       f"nothing changes today")
            severity = Severity.NOTE
        elif hook is None:
            skipped = "skips forward hooks and pre-hooks (this file registers none, so nothing changes today)"
            severity = Severity.NOTE
        else:
            skipped = f"skips forward hooks and pre-hooks, which this file registers (`{ctx.short(hook, 40)}`)"
            severity = Severity.WARNING
        ctx.report(
            node.func.attr,
            f"`{ctx.short(node, 50)}` calls `forward` directly and {skipped}; "
            f"call the module: `{ctx.short(receiver, 30)}(...)`",
            FixSpec(f"Call `{ctx.short(receiver, 30)}(...)` instead", (Replace(node.func, spelled),),
                    Applicability.UNSAFE),
            severity=severity,
        )


# torch utilities that work through hooks the module call runs (a forward pre-hook recomputes
# the weight of `spectral_norm`/`weight_norm`, pruning applies its mask in one).
_HOOK_UTILITIES = ("torch.nn.utils.spectral_norm", "torch.nn.utils.weight_norm",
                   "torch.nn.utils.parametrizations.", "torch.nn.utils.parametrize.",
                   "torch.nn.utils.prune.")


def _registers_hooks(sem: Semantic, receiver: Optional[str]) -> Optional[cst.Call]:
    """The first call in the file that registers a module hook: `m.register_forward_hook(...)`,
    `register_forward_pre_hook`, `register_full_backward_hook`, ..., or a torch utility that
    works through one (`nn.utils.spectral_norm(conv)`, `prune.l1_unstructured(...)`).

    With `receiver` (`net`, as `net.forward(x)` spells it), only the hooks that may be on that
    module itself: one registered on a submodule (`net.layer4.register_forward_hook(...)`,
    `spectral_norm(net.conv)`) still fires when `net.forward(x)` calls `self.layer4(...)`."""
    for call in sem.index.nodes(cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value.startswith("register_") \
                and func.attr.value.endswith("hook"):
            if receiver is None or not _below(sem.source(func.value), receiver):
                return call
            continue
        name = sem.qualified_name(func) or ""
        if name.startswith(_HOOK_UTILITIES):
            target = call.args[0].value if call.args and call.args[0].keyword is None else None
            if receiver is None or target is None or not _below(sem.source(target), receiver):
                return call
    return None


def _below(spelled: str, receiver: str) -> bool:
    """`net.layer4` or `net.blocks[2]` is a submodule of `net`."""
    return len(spelled) > len(receiver) and spelled.startswith(receiver) and spelled[len(receiver)] in ".["


def _is_module_instance(expr: cst.BaseExpression, sem: Semantic) -> bool:
    """A module, as the value model knows it: built in this file, a submodule attribute, an item
    of a module container, a parameter annotated `nn.Module` (or passed one by every caller)."""
    if isinstance(expr, cst.Call):
        return False  # `super().forward(...)`, `Net().forward(...)` is rare and fine to skip
    return sem.values.of(expr).kind == MODULE


__all__ = ["DirectForwardCall"]
