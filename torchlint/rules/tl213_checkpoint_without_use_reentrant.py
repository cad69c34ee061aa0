"""TL213: `torch.utils.checkpoint.checkpoint(...)` without `use_reentrant=`."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.api_changes import BY_API, DEFAULT, ApiChange
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# The entries of the API-change table this rule reports: a default that must now be passed.
_CHANGES = {change.api: change for change in BY_API.values()
            if change.kind == DEFAULT and change.keyword == "use_reentrant"}


class CheckpointWithoutUseReentrant(Rule):
    code = "TL213"
    name = "checkpoint-without-use-reentrant"
    summary = "`checkpoint(...)` without `use_reentrant=` warns and runs the reentrant variant: pass `use_reentrant=False`"
    fix_availability = "sometimes"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: torch 2.13 warns on every call and runs the reentrant variant, whose blocks get no
gradient when no input requires grad; whether that bites depends on the inputs. A **note** when
the call sits behind a switch that is off by default (`if self.use_checkpoint:` stored from a
constructor parameter defaulting to False, a `store_true` option, a parameter or module constant
that is False): only a run that turns it on checkpoints. (This holds for every rule: a finding on
a branch the default configuration never takes is one step less severe, and says so.)
"""
    triggers = ("checkpoint",)
    node_types = (cst.Call,)
    confirmation_module = "tl213"
    docs = """
## What it does
Flags calls of `torch.utils.checkpoint.checkpoint` and `checkpoint_sequential` (however they
are imported) that do not pass `use_reentrant`. The functions and the facts come from the
API-change table (`torchlint/analysis/api_changes/keywords.py`).

Not flagged: a call with `use_reentrant=True` or `=False` (or any expression), a call with
`**kwargs` (it may carry the keyword), and functions called `checkpoint` that are not torch's
(`deepspeed.checkpointing.checkpoint`, a same-file helper).

## Why is this bad?
Measured on torch 2.13: a call without `use_reentrant` emits, on every call, `UserWarning:
torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in
PyTorch 2.9, calling checkpoint without use_reentrant will raise an exception.` (2.13 still does
not raise) and then runs the reentrant variant. That variant has a trap the warning does not
name: when no tensor argument requires grad, which is the case for the first checkpointed block
of a network fed plain data, the output has no `grad_fn`, so `backward()` raises `element 0 of
tensors does not require grad` or, when the loss also depends on other layers, the block's
parameters silently get no gradient and never train (torch only warns `None of the inputs have
requires_grad=True. Gradients will be None`). `use_reentrant=False` has neither problem and is
what PyTorch recommends. Whether the trap springs depends on the inputs, so the finding is a
warning.

## Example
```python
from torch.utils.checkpoint import checkpoint

h = checkpoint(self.block, x)
```

Use instead:
```python
h = checkpoint(self.block, x, use_reentrant=False)
```

## Fix safety
The fix appends `use_reentrant=False`. It is unsafe: the non-reentrant variant differs from
today's implicit `use_reentrant=True` in what it supports (hooks, `torch.autograd.grad` inside
the function, inputs that do not require grad), so a program that relies on the reentrant
behaviour changes. Passing `use_reentrant=True` by hand keeps today's behaviour exactly and
silences the warning. No fix is offered for a call with `*args` after which a keyword cannot be
placed safely.

## References
- https://pytorch.org/docs/stable/checkpoint.html
- https://dev-discuss.pytorch.org/t/bc-breaking-update-to-torch-utils-checkpoint-not-passing-in-use-reentrant-flag-will-raise-an-error/1745
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        name = ctx.semantic.call_name(node)
        change = _CHANGES.get(name or "")
        if change is None:
            return
        if any(arg.keyword is not None and arg.keyword.value == change.keyword for arg in node.args):
            return
        if any(arg.star == "**" for arg in node.args):
            return  # `**kwargs` may carry use_reentrant
        function = name.rsplit(".", 1)[-1]
        ctx.report(
            node,
            f"`{function}(...)` without `{change.keyword}=` warns on every call and runs the "
            "reentrant variant, whose blocks get no gradient when no input requires grad; pass "
            f"`{change.keyword}=False` (or `=True` to keep today's behaviour)",
            _fix(node, change, ctx),
            severity=Severity.WARNING,
        )


def _fix(node: cst.Call, change: ApiChange, ctx: RuleContext) -> Optional[FixSpec]:
    if not node.args:
        return None
    last = node.args[-1]
    text = ctx.code(last.value)
    if last.keyword is not None:
        text = f"{last.keyword.value}={text}"
    elif last.star:
        text = f"{last.star}{text}"
    return FixSpec(f"Pass `{change.keyword}=False`",
                   (Replace(last, f"{text}, {change.keyword}=False"),), Applicability.UNSAFE)
