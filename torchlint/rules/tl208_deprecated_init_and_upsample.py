"""TL208: `nn.init.xavier_uniform` (no underscore) and `F.upsample*`: PyTorch 0.4 renames."""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis import legacy
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# torch/nn/init.py `_make_deprecate`: each old name warns and calls the in-place `<name>_`.
_INIT_NAMES = {"uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
               "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse"}
# torch.nn.functional: name -> the keyword arguments that make `interpolate` compute the same.
_UPSAMPLE = {
    "upsample": "",  # interpolate(input, size, scale_factor, mode, align_corners)
    "upsample_nearest": "",  # interpolate(input, size, scale_factor, mode="nearest"): the default
    "upsample_bilinear": 'mode="bilinear", align_corners=True',
}
_SPELLINGS = frozenset(_INIT_NAMES) | frozenset(_UPSAMPLE)


class DeprecatedInitAndUpsample(Rule):
    code = "TL208"
    name = "deprecated-init-and-upsample"
    summary = "`nn.init.xavier_uniform` and `F.upsample*` are deprecated: `xavier_uniform_`, `F.interpolate`"
    fix_availability = "sometimes"
    triggers = ("init", "upsample")
    node_types = (cst.Attribute, cst.Name)
    confirmation_module = "tl208"
    default_severity = Severity.NOTE
    severity_docs = """
A **note**: `nn.init.xavier_uniform` and the other non-underscore initialisers, and
`F.upsample`/`upsample_nearest`/`upsample_bilinear`, still work (with a deprecation warning) and
compute the same as their replacements: a deprecated spelling, no effect on results today.
"""
    docs = """
## What it does
Flags the `torch.nn.init` initialisers without their trailing underscore (`uniform`, `normal`,
`constant`, `eye`, `dirac`, `xavier_uniform`, `xavier_normal`, `kaiming_uniform`,
`kaiming_normal`, `orthogonal`, `sparse`) and `torch.nn.functional.upsample`,
`upsample_nearest` and `upsample_bilinear`, however they are imported, where they are called.

Not flagged: the underscore initialisers (`nn.init.xavier_uniform_`), `F.interpolate`, the
`nn.Upsample` / `nn.UpsamplingBilinear2d` modules, and functions of the same names that are not
torch's; a reference that is not called (`ignored = {F.upsample, ...}`, torch's own
`overrides.py`), which neither warns nor may be renamed.

## Why is this bad?
PyTorch 0.4 renamed the initialisers (they fill the tensor in place) and 0.4.1 replaced
`upsample*` by `interpolate`; the old names only forward to the new ones. Measured on torch 2.13,
every call warns: `FutureWarning: nn.init.xavier_uniform is now deprecated in favor of
nn.init.xavier_uniform_.` and `UserWarning: nn.functional.upsample is deprecated. Use
nn.functional.interpolate instead.` (also for `upsample_nearest` and `upsample_bilinear`). A
`FutureWarning` announces removal.

`upsample_bilinear` is easy to replace wrongly: it is `interpolate(..., mode="bilinear",
align_corners=True)` (torch 2.13's own implementation, and equal element for element on a
measured input), while `interpolate(..., mode="bilinear")` alone uses `align_corners=False` and
gives other values.

## Example
```python
nn.init.xavier_uniform(self.fc.weight)
y = F.upsample(x, scale_factor=2, mode="nearest")
z = F.upsample_bilinear(x, scale_factor=2)
```

Use instead:
```python
nn.init.xavier_uniform_(self.fc.weight)
y = F.interpolate(x, scale_factor=2, mode="nearest")
z = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)
```

## Fix safety
The fixes are safe, each calling the function the old name forwards to with the same
arguments: `xavier_uniform` becomes `xavier_uniform_`, `upsample` and `upsample_nearest` become
`interpolate` (same parameters in the same order; `nearest` is `interpolate`'s default mode), and
`upsample_bilinear(...)` becomes `interpolate(..., mode="bilinear", align_corners=True)`. No fix
is offered for a name imported on its own (`from torch.nn.init import xavier_uniform`: the import
would have to change too), or for `upsample_bilinear` called with `*args`/`**kwargs`.

## References
- https://pytorch.org/docs/stable/nn.init.html
- https://pytorch.org/docs/stable/generated/torch.nn.functional.interpolate.html
- https://github.com/pytorch/pytorch/blob/main/torch/nn/functional.py (`upsample_bilinear`)
"""

    def candidates(self, node_type, semantic):
        """Only the names spelled like an old initializer or upsampling function (every other
        one `check` leaves at once)."""
        if node_type is cst.Attribute:
            return semantic.index.attributes_named(_SPELLINGS)
        return semantic.index.names_spelled_any(_SPELLINGS)

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        spelled = node.attr.value if type(node) is cst.Attribute else node.value
        if spelled not in _INIT_NAMES and spelled not in _UPSAMPLE:
            return  # the last part of the name is spelled out: no resolving for other names
        if not _is_called(node, ctx):
            return  # a reference (`ignored = {F.upsample, ...}`) neither warns nor may be renamed
        name = ctx.semantic.qualified_name(node)
        if name is None or not name.startswith(("torch.nn.init.", "torch.nn.functional.")):
            return
        if isinstance(node, cst.Name) and not _is_bare_reference(node, ctx):
            return
        module, _, function = name.rpartition(".")
        if module == "torch.nn.init" and function in _INIT_NAMES:
            self._report_init(node, function, ctx)
        elif module == "torch.nn.functional" and function in _UPSAMPLE:
            self._report_upsample(node, function, ctx)

    def _report_init(self, node: cst.CSTNode, function: str, ctx: RuleContext) -> None:
        fix = None
        if isinstance(node, cst.Attribute):
            fix = FixSpec(f"Use `{function}_`", (Replace(node.attr, f"{function}_"),), Applicability.SAFE)
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` is deprecated since PyTorch 0.4 (a FutureWarning on every call); "
            f"`{function}_` does the same, in place",
            fix,
        )

    def _report_upsample(self, node: cst.CSTNode, function: str, ctx: RuleContext) -> None:
        extra = _UPSAMPLE[function]
        replacement = f"interpolate({', '.join(['...', extra])})" if extra else "interpolate"
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` is deprecated since PyTorch 0.4.1 (a UserWarning on every call); "
            f"`{replacement}` computes the same",
            _upsample_fix(node, function, ctx),
        )


def _is_called(node: cst.CSTNode, ctx: RuleContext) -> bool:
    call = ctx.semantic.parent(node)
    return isinstance(call, cst.Call) and call.func is node


def _is_bare_reference(name: cst.Name, ctx: RuleContext) -> bool:
    """A name bound by an import and used on its own (`xavier_uniform(w)` after `from
    torch.nn.init import xavier_uniform`): not a part of `nn.init.xavier_uniform`, not the name
    in the import statement, not a variable assigned the function (`fn = F.upsample`)."""
    parent = ctx.semantic.parent(name)
    if isinstance(parent, (cst.Attribute, cst.ImportAlias, cst.ImportFrom)):
        return False
    bindings = ctx.semantic.scopes.lookup(name.value, name)
    return bool(bindings) and all(isinstance(binding.node, (cst.Import, cst.ImportFrom)) for binding in bindings)


def _upsample_fix(node: cst.CSTNode, function: str, ctx: RuleContext) -> Optional[FixSpec]:
    if not isinstance(node, cst.Attribute):
        return None
    rename = Replace(node.attr, "interpolate")
    extra = _UPSAMPLE[function]
    if not extra:
        return FixSpec("Use `interpolate`", (rename,), Applicability.SAFE)
    call = ctx.semantic.parent(node)
    if not isinstance(call, cst.Call) or call.func is not node or not call.args or any(a.star for a in call.args):
        return None
    last = call.args[-1]
    written = legacy.render_in_place(ctx.semantic, last, last.with_changes(comma=cst.MaybeSentinel.DEFAULT))
    edits: Tuple = (rename, Replace(last, f"{written}, {extra}"))
    return FixSpec(f"Use `interpolate(..., {extra})`", edits, Applicability.SAFE)
