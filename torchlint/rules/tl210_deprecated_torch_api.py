"""TL210: a deprecated torch API that still runs today (it warns, or is deprecated in the docs)."""

from __future__ import annotations

import re
from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis.api_changes import CHECKED_ON, DOCS, WARNS, ApiChange, removed
from torchlint.analysis.api_changes import match as drift
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_OUTCOMES = (WARNS, DOCS)
# `torch.<device>.amp.<name>(**kw)` is `torch.amp.<name>("<device>", **kw)`.
_DEVICE_AMP = re.compile(r"^torch\.(cuda|cpu)\.amp\.(autocast|GradScaler)$")
# Global settings that the old amp classes ignore and the new ones read (see the entries' notes).
_AMP_GLOBALS = ("set_autocast_dtype", "set_autocast_cache_enabled")
# Renames valid only for some argument shapes: the positional count and the keywords allowed.
_RENAME_ARGUMENTS = {"torch.qr": (1, ()), "torch.cholesky": (1, ("upper",))}


def _table() -> str:
    rows = []
    for change in removed.CHANGES:
        if change.outcome not in _OUTCOMES:
            continue
        since = f"deprecated in {change.deprecated_in}" if change.deprecated_in else "deprecated"
        how = "warns" if change.outcome == WARNS else "docs only, no warning"
        level = "warning" if drift.announces_removal(change) else "note"
        checked = "" if change.check.checked == "torch" else "; source-checked"
        rows.append(f"- `{change.api}` ({since}; {how}; {level}{checked}) → {change.replacement}")
    return "\n".join(rows)


def _severity(change: ApiChange) -> Severity:
    return Severity.WARNING if drift.announces_removal(change) else Severity.NOTE


class DeprecatedTorchApi(Rule):
    code = "TL210"
    name = "deprecated-torch-api"
    summary = "A deprecated torch API that still runs (`torch.cuda.amp.autocast`, `torch.range`, `torch.qr`): use its replacement"
    fix_availability = "sometimes"
    default_severity = Severity.NOTE
    severity_docs = """
A **warning** when the entry's measured warning announces removal ("will be removed", "will be
deleted"): the code breaks on a coming release. A **note** otherwise: the old spelling still
computes the same today.
"""
    triggers = drift.triggers(_OUTCOMES)
    node_types = (cst.Attribute, cst.Name, cst.Import, cst.ImportFrom)
    confirmation_module = "tl210"
    docs = f"""
## What it does
Flags calls and imports of torch (and functorch, torchvision) APIs that are deprecated but still
work, from the API-change table (`torchlint/analysis/api_changes/removed.py`), resolved through
the file's imports (`import torch`, aliases, `from torch.cuda.amp import autocast`):

{_table()}

Not flagged: the replacements (`torch.amp.autocast`, `torch.arange`, `torch.linalg.qr`),
same-named functions that are not torch's (`np.linalg.qr`, `scipy.linalg.cholesky`, your own
`range`), a reference that is not called (`fn = torch.qr`, which neither warns nor crashes),
strings and comments. The `nn.init` and `F.upsample` renames are TL208's.

## Why is this bad?
Each call emits a warning on today's release (measured on {CHECKED_ON}, e.g. `FutureWarning:
torch.cuda.amp.autocast(args...) is deprecated. Please use torch.amp.autocast('cuda', args...)
instead.`) or is marked deprecated in its documentation (`torch.norm`, `torch.svd`, `torch.ger`:
no warning, the docstring says so), and the next releases may remove it, at which point the
program crashes (as `torch.solve` did: TL209). The result is the same today.

Severity: a warning when the measured warning text announces the removal ("will be removed" /
"will be deleted": `torch.range`, `torch.qr`, `torch.cholesky`, `torch.chain_matmul`,
`functorch.*`, `sdp_kernel`, `assert_allclose`, ...), else a note (the amp classes, `weight_norm`,
`clip_grad_norm`, and the documentation-only deprecations): a deprecated spelling that computes
the same today.

## Example
```python
import torch

with torch.cuda.amp.autocast(enabled=True):
    y = model(x)
r = torch.range(0, 9)
Q, R = torch.qr(A)
C = torch.chain_matmul(A, B, C)
```

Use instead:
```python
import torch

with torch.amp.autocast("cuda", enabled=True):
    y = model(x)
r = torch.arange(0, 9 + 1)
Q, R = torch.linalg.qr(A)
C = torch.linalg.multi_dot([A, B, C])
```

## Fix safety
Safe where the replacement computes the same for the call as written: `torch.qr(A)` →
`torch.linalg.qr(A)`, `torch.cholesky(A[, upper=...])` → `torch.linalg.cholesky(...)`,
`torch.ger` → `torch.outer`, `clip_grad_norm` → `clip_grad_norm_`, `torch.chain_matmul(a, b,
...)` (two or more matrices) → `torch.linalg.multi_dot([a, b, ...])`, and
`torch.cuda.amp.autocast(**kw)` / `GradScaler(**kw)` → `torch.amp.autocast("cuda", **kw)` when
every argument is a keyword (their positional orders differ) and the file does not change the
autocast dtype or cache defaults globally (then unsafe). Unsafe: `torch.range(a, b[, s])` →
`torch.arange(a, b + 1)` / `torch.arange(a, b + s, s)` (a float step changes the element count,
and `range` returns floats where `arange` of ints gives int64); `_register_pytree_node` →
`register_pytree_node`. No fix for an API imported by name (the import would have to change
too) or whose replacement has other semantics (`weight_norm`, `sdp_kernel`, `svd`, `norm`).

## References
- https://pytorch.org/docs/stable/amp.html
- https://pytorch.org/docs/stable/linalg.html
- https://github.com/pytorch-labs/torchfix (TOR101, TOR103, TOR202)
"""

    def candidates(self, node_type, semantic):
        return drift.candidates(node_type, semantic)

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if type(node) in (cst.Import, cst.ImportFrom):
            for use in drift.import_uses(node, sem):
                if use.change.outcome in _OUTCOMES:
                    names = ", ".join(f"`{n}`" for n in use.names)
                    ctx.report(use.node, f"imports {names}, deprecated ({self._how(use.change)}); use "
                                         f"{use.change.replacement}", severity=_severity(use.change))
            return
        use = drift.name_use(node, sem)
        if use is None or use.change.outcome not in _OUTCOMES:
            return
        change = use.change
        ctx.report(
            use.node,
            f"`{ctx.short(use.node, 40)}` is deprecated ({self._how(change)}) and still computes the same; "
            f"use {change.replacement}",
            self._fix(use, ctx),
            severity=_severity(change),
        )

    @staticmethod
    def _how(change: ApiChange) -> str:
        since = f" since {change.deprecated_in}" if change.deprecated_in else ""
        if change.outcome == DOCS:
            return f"in the documentation{since}; no warning yet"
        return f"{since.strip()}: it warns `{change.headline}`" if since else f"it warns `{change.headline}`"

    def _fix(self, use: drift.Use, ctx: RuleContext) -> Optional[FixSpec]:
        change, node, sem = use.change, use.node, ctx.semantic
        call = sem.parent(node)
        called = use.how == "call" and isinstance(call, cst.Call)
        if not isinstance(node, cst.Attribute):
            return None
        if change.api in _RENAME_ARGUMENTS:
            limit, keywords = _RENAME_ARGUMENTS[change.api]
            if not called or not _arguments_within(call, limit, keywords):
                return None
        edit = drift.rename_edit(node, change, sem)
        if edit is not None:
            applicability = Applicability.SAFE if change.exact_fix else Applicability.UNSAFE
            return FixSpec(f"Use `{change.rename}`", (Replace(edit[0], edit[1]),), applicability)
        if not called:
            return None
        if change.api == "torch.chain_matmul":
            return _chain_matmul_fix(node, call, ctx)
        if change.api == "torch.range":
            return _range_fix(node, call, ctx)
        device_amp = _DEVICE_AMP.match(change.api)
        if device_amp:
            return _amp_fix(node, call, device_amp.group(1), device_amp.group(2), ctx)
        return None


def _arguments_within(call: cst.Call, positional: int, keywords: Tuple[str, ...]) -> bool:
    count = 0
    for arg in call.args:
        if arg.star:
            return False
        if arg.keyword is None:
            count += 1
        elif arg.keyword.value not in keywords:
            return False
    return count == positional


def _module_spelling(node: cst.Attribute, ctx: RuleContext) -> Optional[str]:
    return ctx.code(node.value) if ctx.semantic.qualified_name(node.value) == "torch" else None


def _chain_matmul_fix(node: cst.Attribute, call: cst.Call, ctx: RuleContext) -> Optional[FixSpec]:
    module = _module_spelling(node, ctx)
    if module is None or len(call.args) < 2 or any(a.star or a.keyword is not None for a in call.args):
        return None
    matrices = ", ".join(ctx.code(a.value) for a in call.args)
    return FixSpec("Use `torch.linalg.multi_dot([...])`",
                   (Replace(call, f"{module}.linalg.multi_dot([{matrices}])"),), Applicability.SAFE)


def _range_fix(node: cst.Attribute, call: cst.Call, ctx: RuleContext) -> Optional[FixSpec]:
    if _module_spelling(node, ctx) is None or any(a.star for a in call.args):
        return None
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) not in (2, 3) or any(a.keyword is not None for a in call.args[:len(positional)]):
        return None
    end = positional[1].value
    step = positional[2].value if len(positional) == 3 else None
    simple = (cst.Name, cst.Integer, cst.Float, cst.Attribute, cst.Call, cst.Subscript)
    end_code = ctx.code(end) if isinstance(end, simple) else f"({ctx.code(end)})"
    step_code = "1" if step is None else ctx.code(step) if isinstance(step, simple) else f"({ctx.code(step)})"
    return FixSpec("Use `torch.arange` with the end + step (arange excludes the end)",
                   (Replace(node.attr, "arange"), Replace(end, f"{end_code} + {step_code}")), Applicability.UNSAFE)


def _amp_fix(node: cst.Attribute, call: cst.Call, device: str, name: str, ctx: RuleContext) -> Optional[FixSpec]:
    root = drift.torch_root(node, ctx.semantic)
    if root is None or any(a.star or a.keyword is None for a in call.args):
        return None
    arguments = "".join(f", {a.keyword.value}={ctx.code(a.value)}" for a in call.args)
    new = f'{root}.amp.{name}("{device}"{arguments})'
    # Regenerating the module's code to search it costs more than the rest of the rule.
    safe = name != "autocast" or not ctx.semantic.index.names_spelled_any(_AMP_GLOBALS)
    return FixSpec(f'Use `torch.amp.{name}("{device}", ...)`', (Replace(call, new),),
                   Applicability.SAFE if safe else Applicability.UNSAFE)
