"""TL214: `torch.utils.data._utils.collate.default_collate`, a private path of a public function."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.scopes import dotted_name
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_PRIVATE_MODULE = "torch.utils.data._utils.collate"
_PUBLIC_MODULE = "torch.utils.data"
# The functions of the private module that torch.utils.data exports (the same objects, checked on
# torch 2.13: `torch.utils.data.default_collate is torch.utils.data._utils.collate.default_collate`).
# `collate` and `default_collate_fn_map` are documented under their private path and stay silent.
_PUBLIC_ALIASES = {
    f"{_PRIVATE_MODULE}.default_collate": f"{_PUBLIC_MODULE}.default_collate",
    f"{_PRIVATE_MODULE}.default_convert": f"{_PUBLIC_MODULE}.default_convert",
}
_NAMES = frozenset(name.rsplit(".", 1)[1] for name in _PUBLIC_ALIASES)


class PrivateDefaultCollate(Rule):
    code = "TL214"
    name = "private-default-collate"
    summary = "`torch.utils.data._utils.collate.default_collate` is a private path: use `torch.utils.data.default_collate`"
    fix_availability = "sometimes"
    default_severity = Severity.NOTE
    severity_docs = """
A **note**: the private path is the same function today; it may move without notice.
"""
    triggers = ("_utils",)
    node_types = (cst.ImportFrom, cst.Attribute)
    confirmation_module = "tl214"
    docs = """
## What it does
Flags `default_collate` and `default_convert` reached through the private module
`torch.utils.data._utils.collate`: the import `from torch.utils.data._utils.collate import
default_collate`, and a dotted use such as `torch.utils.data._utils.collate.default_convert(x)`
or `_utils.collate.default_collate(batch)` after `from torch.utils.data import _utils`. A name
imported from the private module is reported once, at its import, not at every use.

Not flagged: `torch.utils.data.default_collate` / `torch.utils.data.dataloader.default_collate`;
`collate` and `default_collate_fn_map` of the private module, which PyTorch documents under that
path (custom collate functions); other private names; a use through a relative import (`from .
import _utils`), which only code inside `torch.utils.data` itself can write.

## Why is this bad?
Nothing breaks today: measured on torch 2.13, `torch.utils.data.default_collate` is the very
same function object. But `_utils` is private, so PyTorch may move or rename it without a
deprecation period, and the public name has been exported since PyTorch 1.11. This is a note.

## Example
```python
from torch.utils.data._utils.collate import default_collate
batch = default_collate(samples)
```

Use instead:
```python
from torch.utils.data import default_collate
batch = default_collate(samples)
```

## Fix safety
The fix is safe: the public name is the same object. It rewrites the import's module to
`torch.utils.data` when every name the import brings is one of the two public ones, and a dotted
use that starts at `torch` (`torch.utils.data._utils.collate.default_convert`) to
`torch.utils.data.default_convert`. No fix for an import that also brings other names, or a
dotted use through another alias (`_utils.collate.default_collate`: the import would have to
change too).

## References
- https://pytorch.org/docs/stable/data.html#torch.utils.data.default_collate
- https://github.com/pytorch/pytorch/pull/69862
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        if isinstance(node, cst.ImportFrom):
            self._check_import(node, ctx)
        else:
            self._check_use(node, ctx)

    def _check_import(self, node: cst.ImportFrom, ctx: RuleContext) -> None:
        if node.relative or node.module is None or dotted_name(node.module) != _PRIVATE_MODULE:
            return
        if isinstance(node.names, cst.ImportStar):
            return
        private = [alias for alias in node.names if dotted_name(alias.name) in _NAMES]
        if not private:
            return
        names = ", ".join(f"`{dotted_name(alias.name)}`" for alias in private)
        fix = None
        if len(private) == len(node.names):
            fix = FixSpec(f"Import from `{_PUBLIC_MODULE}`", (Replace(node.module, _PUBLIC_MODULE),),
                          Applicability.SAFE)
        ctx.report(
            node,
            f"{names} imported from the private `{_PRIVATE_MODULE}`, which may move without "
            f"notice; import the same function from `{_PUBLIC_MODULE}`",
            fix,
            severity=Severity.NOTE,
        )

    def _check_use(self, node: cst.Attribute, ctx: RuleContext) -> None:
        if node.attr.value not in _NAMES:
            return
        sem = ctx.semantic
        if isinstance(sem.parent(node), (cst.ImportFrom, cst.ImportAlias, cst.Import)):
            return
        name = sem.qualified_name(node)
        public = _PUBLIC_ALIASES.get(name or "")
        if public is None:
            return
        if _bound_by_relative_import(node, ctx):
            return  # `from . import _utils`: the file is part of torch.utils.data itself
        fix: Optional[FixSpec] = None
        if dotted_name(node) == name:  # spelled out from `torch` itself
            fix = FixSpec(f"Use `{public}`", (Replace(node, public),), Applicability.SAFE)
        ctx.report(
            node,
            f"`{ctx.short(node, 50)}` is reached through the private `{_PRIVATE_MODULE}`, which "
            f"may move without notice; `{public}` is the same function",
            fix,
            severity=Severity.NOTE,
        )


def _bound_by_relative_import(node: cst.Attribute, ctx: RuleContext) -> bool:
    root = node
    while isinstance(root, cst.Attribute):
        root = root.value
    if not isinstance(root, cst.Name):
        return False
    bindings = ctx.semantic.scopes.lookup(root.value, root) or []
    return any(isinstance(b.node, cst.ImportFrom) and b.node.relative for b in bindings)
