"""TL209: a torch (torchvision, torchtext) API that today's release removed: the program crashes."""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from torchlint.analysis import pins
from torchlint.analysis.api_changes import CHECKED_ON, RAISES, ApiChange, removed
from torchlint.analysis.api_changes import match as drift
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


def _table() -> str:
    rows = []
    for change in removed.CHANGES:
        if change.outcome != RAISES:
            continue
        since = f"removed in {change.changed_in}" if change.changed_in else "removed"
        checked = f"checked on {CHECKED_ON}" if change.check.checked == "torch" else "source-checked"
        error = change.error if len(change.error) <= 90 else change.error[:89] + "…"
        rows.append(f"- `{change.api}` ({since}; {checked}): `{error}` → {change.replacement}")
    return "\n".join(rows)


class RemovedTorchApi(Rule):
    code = "TL209"
    name = "removed-torch-api"
    summary = "A removed torch/torchvision/torchtext API (`torch.solve`, `torch._six`, `iter(loader).next()`): it raises today"
    fix_availability = "sometimes"
    default_severity = Severity.ERROR
    severity_docs = """
An **error** where the removed API is used or imported at run time: the call or the import raises
(`RuntimeError ... is now removed`, `ModuleNotFoundError`, `AttributeError`). A **warning** for an
import by name of a function that still exists and raises only when it is called (`from torch
import solve`), since the file may never call it.
"""
    triggers = drift.triggers((RAISES,))  # "next" among them: the DataLoader iterator's `.next()`
    node_types = (cst.Attribute, cst.Name, cst.Import, cst.ImportFrom)
    confirmation_module = "tl209"
    docs = f"""
## What it does
Flags uses and imports of APIs that today's PyTorch (or torchvision / torchtext) no longer has,
from the API-change table (`torchlint/analysis/api_changes/removed.py`), resolved through the
file's imports (`import torch`, `import torch as th`, `from torch import solve`, `import
torch._six`, `from torch._six import string_classes`, `from torch import _six`):

{_table()}

A function that still exists but raises when called (`torch.solve`) is flagged where it is
called; one that is gone (`torch.rfft`) and a removed module wherever they are named. The
DataLoader iterator's `.next()` is flagged only where the receiver is certainly `iter(loader)`,
`loader.__iter__()` or `enumerate(loader)` of a `torch.utils.data.DataLoader` (directly or
through a variable), by the analysis, or a parameter the function uses as a loader (its items
are fed to a model whose loss it backpropagates); `.next()` on `iter(x)` of a list, tuple, dict,
generator or tensor is flagged too, unless the file defines a method `next` (Python 3 iterators
have none); the removed Tensor methods (`A.symeig()`, `B.solve(A)`,
`A.eig()`, `B.lstsq(A)`, `A.matrix_rank()`) only where the analysis knows the receiver is a
tensor.

Not flagged: the replacements (`torch.linalg.solve`), functions of the same name that are not
torch's (`np.linalg.solve`, `scipy.linalg.eig`, your own `solve`), `.next()` on other objects,
`iter(x).next()` of an object the analysis does not know (a library's iterator may define
`next`), strings and comments.

## Why is this bad?
The program crashes on today's release: measured on {CHECKED_ON}, `torch.solve(B, A)` raises
`RuntimeError: This function was deprecated since version 1.9 and is now removed`,
`import torch._six` raises `ModuleNotFoundError`, and `iter(loader).next()` raises
`AttributeError: '_SingleProcessDataLoaderIter' object has no attribute 'next'`. An import of a
removed module fails when the file is imported, before any training starts. `torchlint --verify
TL209` re-measures every entry on the installed torch; torchvision and torchtext entries were
read in their released sources (those packages cannot be installed beside the CPU torch).

Severity: error for every use and for an import that fails; warning for an import by name of
a function that still exists but raises when called (`from torch import solve`: the import
works, each call crashes).

## Example
```python
import torch
from torch._six import string_classes

X, LU = torch.solve(B, A)
images, labels = iter(loader).next()
```

Use instead:
```python
import torch

string_classes = str
X = torch.linalg.solve(A, B)
images, labels = next(iter(loader))
```

## Fix safety
`iter(loader).next()` becomes `next(iter(loader))` (safe: the same `__next__`). Renames to a
replacement that takes the same arguments are safe (`transforms.Scale` → `transforms.Resize`).
`torch.solve(B, A)[0]` / `.solution` / `X, _ = torch.solve(B, A)` become
`torch.linalg.solve(A, B)` as an unsafe fix: with a batched `A` and an unbatched `B` whose
ndim is `A.ndim - 1`, `linalg.solve` reads `B` as a batch of vectors. `torch.symeig(A,
eigenvectors=True)` becomes `torch.linalg.eigh(A, UPLO="U")` (unsafe: another algorithm,
eigenvector signs may differ). No fix for other forms, `eig`, `lstsq`, `matrix_rank`, modules.

## References
- https://pytorch.org/docs/stable/linalg.html
- https://github.com/pytorch/pytorch/pull/70986 (torch.solve removed)
- https://github.com/pytorch-labs/torchfix (TOR001, TOR004)
"""

    def candidates(self, node_type, semantic):
        return drift.candidates(node_type, semantic)

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if type(node) in (cst.Import, cst.ImportFrom):
            for use in drift.import_uses(node, sem):
                if use.change.outcome == RAISES and not _pinned_before_removal(sem, use.change):
                    self._report_import(use, ctx)
            return
        if isinstance(node, cst.Attribute):
            use = drift.method_use(node, sem)
            if use is not None and use.change.outcome == RAISES:
                if use.change.api.startswith("torch.Tensor."):
                    ctx.report(use.node, f"`{ctx.short(use.node, 40)}`: `Tensor.{node.attr.value}` was removed "
                                         f"({self._since(use.change)}): calling it raises `{use.change.headline}`; "
                                         f"use {use.change.replacement}", severity=Severity.ERROR)
                else:
                    self._report_next(use, node, ctx)
                return
        use = drift.name_use(node, sem)
        if use is None or use.change.outcome != RAISES or _pinned_before_removal(sem, use.change):
            return
        change = use.change
        what = "calling it raises" if use.how == "call" else "this raises"
        ctx.report(
            use.node,
            f"`{ctx.short(use.node, 40)}` was removed ({self._since(change)}): {what} "
            f"`{change.headline}`; use {change.replacement}",
            self._fix(use, ctx),
            severity=Severity.ERROR,
        )

    @staticmethod
    def _since(change: ApiChange) -> str:
        package = change.api.split(".")[0]
        package = "PyTorch" if package == "torch" else package
        return f"{package} {change.changed_in}" if change.changed_in else package

    def _report_import(self, use: drift.Use, ctx: RuleContext) -> None:
        change = use.change
        names = ", ".join(f"`{n}`" for n in use.names)
        early = _pinned_before_addition(ctx.semantic, change)
        if early is not None:
            pinned, added = early
            ctx.report(use.node, f"imports {names}, which the pinned {change.api.split('.')[0]} {pinned} does not "
                                 f"have yet (added in {added}): the import raises `{change.headline}`; pin a "
                                 f"release from {added} on or use the API of the pinned one", severity=Severity.ERROR)
            return
        if drift.reference_fails(change):
            ctx.report(use.node, f"imports {names}, removed ({self._since(change)}): the import raises "
                                 f"`{change.headline}`; use {change.replacement}", severity=Severity.ERROR)
        else:
            ctx.report(use.node, f"imports {names}, removed ({self._since(change)}): every call raises "
                                 f"`{change.headline}`; use {change.replacement}", severity=Severity.WARNING)

    def _report_next(self, use: drift.Use, attribute: cst.Attribute, ctx: RuleContext) -> None:
        receiver = ctx.code(attribute.value)
        fix = FixSpec(f"Use `next({receiver})`", (Replace(use.node, f"next({receiver})"),), Applicability.SAFE)
        what = ("the DataLoader iterator has no `.next()` since Python 2 support went" if use.how == "method"
                else "Python 3 iterators have no `.next()` method")
        ctx.report(use.node, f"`{ctx.short(use.node, 40)}`: {what} (AttributeError); use `next({ctx.short(attribute.value, 30)})`",
                   fix, severity=Severity.ERROR)

    def _fix(self, use: drift.Use, ctx: RuleContext) -> Optional[FixSpec]:
        change, node, sem = use.change, use.node, ctx.semantic
        edit = drift.rename_edit(node, change, sem)
        if edit is not None:
            applicability = Applicability.SAFE if change.exact_fix else Applicability.UNSAFE
            return FixSpec(f"Use `{change.rename}`", (Replace(edit[0], edit[1]),), applicability)
        call = sem.parent(node)
        if use.how != "call" or not isinstance(call, cst.Call) or not isinstance(node, cst.Attribute):
            return None
        if sem.qualified_name(node.value) != "torch":
            return None
        module = ctx.code(node.value)
        if change.api == "torch.solve":
            return _solve_fix(call, module, ctx)
        if change.api == "torch.symeig":
            return _symeig_fix(call, module, ctx)
        return None


# Where an API was added after the package's first releases: a pin older than this lacks it too.
_ADDED_IN = {"torchtext.legacy": "0.9"}


def _pinned_before_removal(sem, change: ApiChange) -> bool:
    """A torchvision / torchtext API the program's own pin keeps: `torchtext==0.6.0` installed by
    the notebook (or in requirements.txt / setup.py) still has `torchtext.data.Field`, and that
    release is pure Python, so it works beside today's torch. Not torch's own APIs: the
    installed torch is what the verifier measures."""
    package = change.api.split(".")[0]
    if package == "torch" or not change.changed_in or not pins.runs_release_below(sem, package, change.changed_in):
        return False
    added = next((release for api, release in _ADDED_IN.items()
                  if change.api == api or change.api.startswith(api + ".")), None)
    return added is None or pins.runs_release_at_least(sem, package, added)


def _pinned_before_addition(sem, change: ApiChange):
    """(the pinned release, the release that added the API) when the program pins a release
    older than the one that added it (`torchtext==0.8.1` and `torchtext.legacy`, added in 0.9)."""
    package = change.api.split(".")[0]
    added = next((release for api, release in _ADDED_IN.items()
                  if change.api == api or change.api.startswith(api + ".")), None)
    if added is None or not pins.runs_release_below(sem, package, added):
        return None
    version, inclusive = pins.pinned(sem, package)
    spelled = ".".join(map(str, version))
    return (spelled if inclusive else f"< {spelled}"), added


def _positional(call: cst.Call) -> Optional[Tuple[cst.Arg, ...]]:
    if any(arg.star or arg.keyword is not None for arg in call.args):
        return None
    return tuple(call.args)


def _solve_fix(call: cst.Call, module: str, ctx: RuleContext) -> Optional[FixSpec]:
    """`torch.solve(B, A)[0]`, `.solution`, `X, _ = torch.solve(B, A)` -> `torch.linalg.solve(A, B)`."""
    args = _positional(call)
    if args is None or len(args) != 2:
        return None
    sem = ctx.semantic
    new = f"{module}.linalg.solve({ctx.code(args[1].value)}, {ctx.code(args[0].value)})"
    parent = sem.parent(call)
    edits: Tuple = ()
    if isinstance(parent, cst.Attribute) and parent.value is call and parent.attr.value == "solution":
        edits = (Replace(parent, new),)
    elif isinstance(parent, cst.Subscript) and parent.value is call and len(parent.slice) == 1 \
            and isinstance(parent.slice[0].slice, cst.Index) \
            and isinstance(parent.slice[0].slice.value, cst.Integer) and parent.slice[0].slice.value.value == "0":
        edits = (Replace(parent, new),)
    elif isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
        target = parent.targets[0].target
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2 \
                and isinstance(target.elements[1].value, cst.Name) and target.elements[1].value.value == "_" \
                and not isinstance(target.elements[0], cst.StarredElement):
            edits = (Replace(target, ctx.code(target.elements[0].value)), Replace(call, new))
    if not edits:
        return None
    return FixSpec("Use `torch.linalg.solve(A, B)`", edits, Applicability.UNSAFE)


def _symeig_fix(call: cst.Call, module: str, ctx: RuleContext) -> Optional[FixSpec]:
    """`torch.symeig(A, eigenvectors=True[, upper=U])` -> `torch.linalg.eigh(A, UPLO=...)`."""
    if not call.args or call.args[0].star or call.args[0].keyword is not None:
        return None
    values = {"eigenvectors": None, "upper": "True"}
    order = ("eigenvectors", "upper")
    for index, arg in enumerate(call.args[1:]):
        if arg.star:
            return None
        name = arg.keyword.value if arg.keyword is not None else (order[index] if index < 2 else None)
        if name not in values:
            return None
        values[name] = ctx.code(arg.value)
    if values["eigenvectors"] != "True" or values["upper"] not in ("True", "False"):
        return None
    uplo = '"U"' if values["upper"] == "True" else '"L"'
    new = f"{module}.linalg.eigh({ctx.code(call.args[0].value)}, UPLO={uplo})"
    return FixSpec(f"Use `torch.linalg.eigh(A, UPLO={uplo})`", (Replace(call, new),), Applicability.UNSAFE)
