"""TL008: hard-coded CUDA in code that chooses its device at run time."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import device_guards
from torchlint.analysis.value import CRITERION, MODULE, TENSOR_KINDS
from torchlint.analysis.semantic import Semantic, method_call
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# Keyword arguments of `.cuda()` that `.to()` takes too.
_KEPT_KEYWORDS = ("non_blocking", "memory_format")


class HardCodedCuda(Rule):
    code = "TL008"
    name = "hard-coded-cuda"
    summary = "Hard-coded CUDA in code that chooses its device at run time fails without a GPU"
    fix_availability = "sometimes"
    triggers = ("cuda",)
    cross_file_triggers = True
    node_types = (cst.Call, cst.Attribute)
    confirmation_module = "tl008"
    severity_docs = """
An **error** when the file itself chooses its device (`torch.device("cuda" if
torch.cuda.is_available() else "cpu")`, `if args.cuda:`, a `--no-cuda` option): the code says it
runs without a GPU, and there the hard-coded placement raises. A **warning** when the only choice
is a `device` parameter of the enclosing function: it raises only for callers that pass the CPU.
A **note** when the file computes a device but never acts on it (`device = torch.device("cuda" if
torch.cuda.is_available() else "cpu")` that is only printed, a `--no-cuda` option nothing reads):
the program runs on CUDA only as written, so the hard-coded placement is its design, not a broken
CPU path.
"""
    docs = """
## What it does
Flags a tensor or module placed on CUDA by hard-coding — `.cuda()`, `.cuda(0)`,
`device="cuda"`, `.to("cuda:0")`, `.to(torch.device("cuda"))`, the legacy
`torch.cuda.FloatTensor` types — in a file that chooses its device at run time:

- a conditional device (`torch.device("cuda" if torch.cuda.is_available() else "cpu")`),
- an `if` on such a condition that moves something (`if args.cuda: model.cuda()`),
- a flag computed from `torch.cuda.is_available()` (`use_cuda = ...`,
  `args.cuda = not args.no_cuda and torch.cuda.is_available()`),
- a `--cuda`/`--no-cuda`/`--cpu`/`--device` command-line option,

or in a function that takes a `device` parameter. Not flagged: code under a guard of the
condition (`if torch.cuda.is_available():`, `if args.cuda:`, either branch, `x.cuda() if
use_cuda else x`, after `assert torch.cuda.is_available()` or `if not use_gpu: return`, in a
`try`, under a CUDA skip decorator, or in a function a same-file caller calls under such a
guard), functions named for devices (`to_gpu`, `get_device`, a `cuda()` method), type checks
(`isinstance(x, torch.cuda.FloatTensor)`), and files that never choose a device: a GPU-only
script is a choice, not a bug. Conditions that follow where a tensor already is (`x.is_cuda`,
`x.device.type == "cuda"`) are guards but not choices, and a file that calls CUDA-only
functions outside any guard (`torch.cuda.get_device_name(0)`, `torch.cuda.set_device(rank)`,
`with torch.cuda.device(1):`) is GPU-only in fact.

## Why is this bad?
The condition says the code is meant to run without a GPU too, and the hard-coded placement
breaks exactly there: on a machine without CUDA, `.cuda()`, `device="cuda"` and
`.to("cuda")` raise `AssertionError: Torch not compiled with CUDA enabled` (torch 2.13, CPU
build), `torch.cuda.FloatTensor(3)` raises `TypeError: type torch.cuda.FloatTensor not
available`; a CUDA build on a machine without a GPU fails at the same call. Run with `--no-cuda`
on a GPU machine, the hard-coded tensor lands on the GPU while the rest stays on the CPU:
`Expected all tensors to be on the same device`.

## Example
```python
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
mask = torch.ones(4).cuda()
```

Use instead:
```python
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = Net().to(device)
mask = torch.ones(4).to(device)
```

## Fix safety
When exactly one device name is in scope (a `device = torch.device(...)` of the file, a `device`
parameter), `.cuda()` becomes `.to(device)` and `device="cuda"` / `.to("cuda")` use `device`.
The fix is safe for a receiver that is certainly a tensor or module and `.cuda()` without a GPU
index: on a GPU machine `device` is that same GPU. It is unsafe when the code names a GPU index
(`.cuda(1)`, `"cuda:0"`: `device` may be another GPU) or the receiver is not known to be a
tensor or module (it may have `.cuda()` but no `.to()`). No fix without a single device name in
scope, and none for the legacy `torch.cuda.*Tensor` types.

## References
- https://pytorch.org/docs/stable/notes/cuda.html#device-agnostic-code
- https://pytorch.org/docs/stable/tensor_attributes.html#torch.device
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        hard = device_guards.hard_coded_cuda(sem, node)
        if hard is None or _moves_nothing(sem, node):
            return
        choice = _device_choice(sem, node)
        if choice is None:
            return
        if device_guards.guarded_by_device_condition(sem, node) or device_guards.in_device_helper(sem, node):
            return
        device = device_guards.device_name_in_scope(sem, node)
        fix = _fix(ctx, sem, hard, device)
        if fix is not None:
            advice = f"use `{fix.message.split('`')[1]}`"
        elif hard.kind == "type":
            advice = ("make the tensor with `torch.tensor(..., device=device)` / `torch.zeros(..., "
                      "device=device)` or cast with `.float()` and move it with `.to(device)`")
            if device is None:
                advice += f" (define `device` from {_describe_choice(ctx, choice)} first)"
        elif device is not None:
            advice = f"place it with the device the code chose (`.to({device})`)"
        else:
            advice = ("place it with the device the code chose: define `device = torch.device(\"cuda\" if "
                      "torch.cuda.is_available() else \"cpu\")` (or follow an input's own `x.device`) and "
                      "use `.to(device)`")
        if hard.kind == "type":
            error = "`TypeError: type torch.cuda.FloatTensor not available`" if _is_construction(sem, node) \
                else "a CUDA error (`Torch not compiled with CUDA enabled` or `Cannot initialize CUDA`)"
        else:
            error = "`AssertionError: Torch not compiled with CUDA enabled`"
        file_choice = device_guards.file_device_choice(sem)
        if file_choice is not None and not any(_choice_used(sem, c) for c in device_guards.file_device_choices(sem)):
            # `device = torch.device("cuda" if ... else "cpu")` that nothing reads: the program
            # never runs on the device it computes; it is CUDA-only as written.
            ctx.report(
                node,
                f"`{ctx.short(node, 40)}` hard-codes CUDA, and the device this file computes "
                f"({_describe_choice(ctx, file_choice)}) is never used: the program runs on CUDA only as "
                f"written, and without a GPU it fails with {error} — {advice}",
                fix, severity=Severity.NOTE)
            return
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` hard-codes CUDA in code that chooses its device "
            f"({_describe_choice(ctx, choice)}): without a GPU it fails with {error} — {advice}",
            fix,
            # The file's own choice says it runs without a GPU, where this line raises; a
            # `device` parameter only says that some caller may pass the CPU.
            severity=Severity.ERROR if file_choice is not None else Severity.WARNING,
        )


_REPORTING = ("print", "info", "debug", "warning", "log", "format", "write", "set_description")


def _choice_used(sem: Semantic, choice: cst.CSTNode) -> bool:
    """Whether the program acts on the device it chooses: an `if` on the condition moves
    something by construction; a name or option it computes (`device = ...`, `use_cuda = ...`,
    `--no-cuda`) must be read somewhere other than its own assignment and a print or log call."""
    if isinstance(choice, cst.If):
        return True
    if isinstance(choice, cst.Call):  # parser.add_argument("--no-cuda", ...)
        flag = device_guards.string_value(choice.args[0].value) if choice.args else None
        if flag is None:
            return True
        dest = flag.lstrip("-").replace("-", "_")
        keyword = next((a.value for a in choice.args if a.keyword is not None and a.keyword.value == "dest"), None)
        dest = device_guards.string_value(keyword) or dest
        return any(a.attr.value == dest for a in sem.index.nodes(cst.Attribute) if not _only_reported(sem, a))
    statement = sem.statement_of(choice)
    if not isinstance(statement, (cst.Assign, cst.AnnAssign)):
        return True
    targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
    names = set()
    for target in targets:
        if isinstance(target, cst.Name):
            names.add(target.value)
        elif isinstance(target, cst.Attribute):
            names.add(target.attr.value)
        else:
            return True
    for node in sem.index.nodes(cst.Name):
        if node.value in names and not sem.index.contains(statement, node) and not _only_reported(sem, node):
            parent = sem.parent(node)
            if isinstance(parent, cst.Attribute) and parent.attr is node and \
                    not isinstance(sem.parent(parent), cst.AssignTarget):
                return True
            if not (isinstance(parent, cst.Attribute) and parent.attr is node):
                return True
    return False


def _only_reported(sem: Semantic, node: cst.CSTNode) -> bool:
    """`node` is an argument of a print or logging call (`print(device)`, `log.info(...)`)."""
    for ancestor in sem.ancestors(node):
        if isinstance(ancestor, cst.Call):
            func = ancestor.func
            name = func.value if isinstance(func, cst.Name) else (
                func.attr.value if isinstance(func, cst.Attribute) else "")
            if name in _REPORTING:
                return True
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
    return False


def _is_construction(sem: Semantic, node: cst.CSTNode) -> bool:
    """`torch.cuda.FloatTensor(3)`, or an alias of the type called (`Tensor = torch.cuda.FloatTensor`
    then `Tensor(3)`): the constructor raises the TypeError. `x.type(torch.cuda.FloatTensor)`
    raises when it initialises CUDA."""
    parent = sem.parent(node)
    if isinstance(parent, cst.Call) and parent.func is node:
        return True
    return isinstance(parent, (cst.Assign, cst.AnnAssign, cst.IfExp))


def _moves_nothing(sem: Semantic, node: cst.CSTNode) -> bool:
    """`nn.CrossEntropyLoss().cuda()`: a weightless torch loss has nothing to move, and the move
    works on a machine without a GPU."""
    if not (isinstance(node, cst.Call) and method_call(node, "cuda", "to")
            and sem.values.is_weightless_torch_loss(sem.values.of(node.func.value))):
        return False
    # `criterion.weight = w` gives it a tensor to move after all.
    spelled = _spelled(node.func.value)
    return spelled is None or not any(
        isinstance(sem.parent(a), cst.AssignTarget) and a.attr.value in ("weight", "pos_weight")
        and _spelled(a.value) == spelled for a in sem.index.nodes(cst.Attribute))


def _spelled(expr: cst.BaseExpression) -> Optional[str]:
    """`criterion` / `self.criterion` as written, or None for anything else."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
        return f"{expr.value.value}.{expr.attr.value}"
    return None


def _device_choice(sem: Semantic, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """Where this file or function chooses its device: the file's own choice, else a `device`
    parameter of an enclosing function."""
    return device_guards.file_device_choice(sem) or device_guards.device_parameter(sem, node)


def _describe_choice(ctx: RuleContext, choice: cst.CSTNode) -> str:
    """`device = … if torch.cuda.is_available() else …`, `if args.cuda:`, `use_cuda = ...`, the
    `--no-cuda` option, its `device` parameter."""
    if isinstance(choice, cst.Param):
        return f"its `{choice.name.value}` parameter"
    if isinstance(choice, cst.If):
        return f"`if {ctx.short(choice.test, 40)}:`"
    if isinstance(choice, cst.Call):  # parser.add_argument("--no-cuda", ...)
        return f"the `{ctx.short(choice.args[0].value, 30).strip(chr(34) + chr(39))}` option"
    statement = ctx.semantic.statement_of(choice)
    conditional = choice if isinstance(choice, cst.IfExp) else next(
        iter(ctx.semantic.index.descendants(choice, cst.IfExp)), None)
    if conditional is not None:
        condition = f"… if {ctx.short(conditional.test, 40)} else …"
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            return f"`{ctx.short(statement.targets[0].target, 20)} = {condition}`"
        return f"`{condition}`"
    return f"`{ctx.short(statement if statement is not None else choice, 60)}`"


def _fix(ctx: RuleContext, sem: Semantic, hard: device_guards.HardCodedCuda,
         device: Optional[str]) -> Optional[FixSpec]:
    if device is None or hard.replace is None:
        return None
    unsafe = hard.indexed
    if hard.kind == "method":
        call = hard.node
        receiver = call.func.value
        kept = [a for a in call.args if a.keyword is not None and a.keyword.value in _KEPT_KEYWORDS]
        if len(kept) != sum(1 for a in call.args if a.keyword is not None and a.keyword.value != "device") \
                or any(a.star for a in call.args):
            return None  # keywords `.to()` does not take
        arguments = ", ".join([device] + [f"{a.keyword.value}={ctx.code(a.value)}" for a in kept])
        unsafe = unsafe or not _is_tensor_or_module(sem, receiver)
        return FixSpec(f"Use `.to({device})`", (Replace(call, f"{ctx.code(receiver)}.to({arguments})"),),
                       Applicability.UNSAFE if unsafe else Applicability.SAFE)
    target = hard.node
    if hard.kind == "to":
        unsafe = unsafe or not _is_tensor_or_module(sem, target.func.value)
        message = f"Use `.to({device})`"
    else:
        message = f"Use `device={device}`"
    return FixSpec(message, (Replace(hard.replace, device),),
                   Applicability.UNSAFE if unsafe else Applicability.SAFE)


def _is_tensor_or_module(sem: Semantic, expr: cst.BaseExpression) -> bool:
    """A receiver that certainly has `.to()`: a tensor made by a torch call, or a module."""
    value = sem.values.of(expr)
    if value.kind in (MODULE, CRITERION):
        return True
    site = value.site
    return value.kind in TENSOR_KINDS and isinstance(site, cst.Call) and \
        (sem.qualified_name(site.func) or "").startswith("torch.")


__all__ = ["HardCodedCuda"]
