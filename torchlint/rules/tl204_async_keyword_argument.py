"""TL204: `x.cuda(async=True)`, PyTorch 0.3's spelling of `non_blocking=True`."""

from __future__ import annotations

import libcst as cst

from torchlint import legacy_syntax
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


class AsyncKeywordArgument(Rule):
    code = "TL204"
    name = "async-keyword-argument"
    summary = "`.cuda(async=True)` is a SyntaxError since Python 3.7; PyTorch 0.4 renamed it `non_blocking=True`"
    fix_availability = "always"
    triggers = ("async",)
    node_types = (cst.Arg,)
    confirmation_module = "tl204"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: `async` is a reserved word since Python 3.7, so `x.cuda(async=True)` is
a `SyntaxError` and the file does not even import.
"""
    docs = """
## What it does
Flags a keyword argument named `async` in a call of `.cuda(...)`, `.to(...)`, `.type(...)` or
`.copy_(...)`: `x.cuda(async=True)`, `target.to(device, async=True)`.

Such a file does not parse, so no linter can say anything else about it. torchlint finds this
exact cause in the tokens, reports it here instead of the generic `TL901` syntax error, and lints
the rest of the file as if each `async=` were `non_blocking=` (every other finding keeps its
position in the file). Any other syntax error in the file is still reported as `TL901`, and an
`async=` argument of any other call (a function of your own) is not rewritten.

## Why is this bad?
PyTorch 0.4 (April 2018) renamed the argument `non_blocking`, because Python 3.7 made `async` a
reserved keyword. On Python 3.7 and later the file cannot even be compiled: measured on Python
3.11, `target.cuda(async=True)` raises `SyntaxError: invalid syntax` before any line of the file
runs. Code copied from tutorials and books written for PyTorch 0.3 (pytorch/examples' ImageNet
script of 2017–2018, for one) fails this way.

## Example
```python
for images, target in loader:
    target = target.cuda(async=True)
```

Use instead:
```python
for images, target in loader:
    target = target.cuda(non_blocking=True)
```

## Fix safety
The fix renames the keyword to `non_blocking`, the name PyTorch has given the same argument since
0.4; the value is kept. It is safe: the meaning (copy asynchronously when the source is in pinned
memory) is unchanged, and the file parses afterwards, so every other rule runs on it.

Through flake8 this rule cannot fire: flake8 runs no plugin on a file that `ast.parse` rejects and
reports `E999 SyntaxError` itself. Run `torchlint` (or `torchlint --fix`) on such files.

## References
- https://github.com/pytorch/pytorch/releases/tag/v0.4.0 (`async` renamed to `non_blocking`)
- https://docs.python.org/3/whatsnew/3.7.html (`async` and `await` are reserved keywords)
- https://pytorch.org/docs/stable/generated/torch.Tensor.cuda.html
"""

    def check(self, node: cst.Arg, ctx: RuleContext) -> None:
        if not _was_async(node, ctx):
            return
        call = ctx.semantic.parent(node)
        method = call.func.attr.value if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) else "cuda"
        value = ctx.short(node.value, 20)
        ctx.report(
            node.keyword,
            f"`.{method}(async={value})` is a SyntaxError on Python 3.7+ (`async` is a reserved keyword), so "
            f"this file cannot run; PyTorch 0.4 renamed the argument: write `non_blocking={value}`",
            FixSpec("Rename `async=` to `non_blocking=`", (Replace(node.keyword, legacy_syntax.NEW),),
                    Applicability.SAFE),
        )


def _was_async(arg: cst.Arg, ctx: RuleContext) -> bool:
    """Whether `arg` was written `async=` (the engine rewrote it so that the file parses)."""
    return any(arg is rewritten for rewritten in ctx.rewritten_async_arguments)
