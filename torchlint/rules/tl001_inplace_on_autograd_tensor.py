"""TL001: in-place operation on a tensor that takes part in autograd."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import autograd
from torchlint.analysis.interpreter import GRAD_OFF, GRAD_UNKNOWN
from torchlint.analysis.value import MODULE, PARAMETER, Value
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_AUGMENTED_OPERATORS = {
    cst.AddAssign: "+", cst.SubtractAssign: "-", cst.MultiplyAssign: "*", cst.DivideAssign: "/",
    cst.FloorDivideAssign: "//", cst.ModuloAssign: "%", cst.PowerAssign: "**",
    cst.MatrixMultiplyAssign: "@", cst.BitAndAssign: "&", cst.BitOrAssign: "|", cst.BitXorAssign: "^",
    cst.LeftShiftAssign: "<<", cst.RightShiftAssign: ">>",
}
_ATOMS = (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float, cst.SimpleString)


class InplaceOnAutogradTensor(Rule):
    code = "TL001"
    name = "inplace-on-autograd-tensor"
    summary = "In-place operation on a tensor that takes part in autograd"
    fix_availability = "sometimes"
    # In-place method names all end in `_(`; augmented and item assignments need `=`.
    triggers = ("_(", "=")
    node_types = (cst.Call, cst.AugAssign, cst.AssignTarget)
    called_names = autograd.INPLACE_METHODS  # only an in-place method call mutates, among calls
    confirmation_module = "tl001"
    severity_docs = """
An **error** when the write goes into a leaf that requires grad (a parameter, a
`requires_grad=True` factory) outside `no_grad`: autograd raises `a leaf Variable that requires
grad is being used in an in-place operation` at that line on every run. A **warning** when it
writes into an input of `forward`: the caller's tensor changes silently, and backward fails only
where autograd saved that tensor.
"""
    docs = """
## What it does
Flags an in-place tensor operation — an in-place method (`add_`, `sub_`, `mul_`, `div_`,
`clamp_`, `zero_`, `fill_`, `copy_`, `sigmoid_`, `masked_fill_`, `normal_`, ...), an augmented
assignment (`+=`, `-=`, `*=`, `/=`, ...) or an item/slice assignment (`w[0] = ...`) — when the
tensor written is

- a leaf that requires grad: a factory called with `requires_grad=True`, `.requires_grad_()`,
  an `nn.Parameter`, a loop variable over `model.parameters()` / `named_parameters()` (also
  through `zip`), a layer's `.weight`/`.bias` (`m.weight.normal_()` in a `model.apply(init)`
  initialiser), the items of `group["params"]` in a custom optimizer's `step`, or a parameter
  passed to a same-file helper that writes into it (`init_table(self.emb.weight)` with
  `E[:, 0::2] = ...`: reported at the write, naming the call) — and the write is not under
  `torch.no_grad()` / `torch.inference_mode()`; or
- an input argument of an `nn.Module.forward` that was not first rebound to a fresh tensor
  (`x = self.fc(x)` and `x = x.clone()` rebind it; `y = x`, `x.view(...)` and `x[0]` do not,
  they share its memory).

## Why is this bad?
Autograd cannot record an in-place write into a leaf it is accumulating gradients for. Measured on
torch 2.13, `w.add_(1)` on `w = torch.zeros(3, requires_grad=True)` raises
`RuntimeError: a leaf Variable that requires grad is being used in an in-place operation.`, and a
slice assignment `w[0] = 1` raises `a view of a leaf Variable that requires grad is being used in
an in-place operation.` The same update is allowed under `torch.no_grad()`.

Writing into the input of `forward` silently changes the caller's tensor. When the layer that
produced it saved its output for backward (sigmoid, tanh, exp, relu outputs; the inputs of a
multiplication), backward then fails with `one of the variables needed for gradient computation
has been modified by an inplace operation: [...] which is output 0 of Sigmoid, is at version 1;
expected version 0`. A fresh temporary such as `(x * 2).add_(1)` is harmless and not flagged.

## Example
```python
for p in model.parameters():
    p -= lr * p.grad            # RuntimeError: a leaf Variable that requires grad ...

class Gate(nn.Module):
    def forward(self, x):
        x.mul_(self.scale)      # modifies the caller's tensor
        return x
```

Use instead:
```python
with torch.no_grad():
    for p in model.parameters():
        p -= lr * p.grad

class Gate(nn.Module):
    def forward(self, x):
        x = x.mul(self.scale)
        return x
```

## Fix safety
Fixes are unsafe, so they are applied only with `--unsafe-fixes`:
- a parameter update outside `no_grad` (`p.sub_(lr * p.grad)` / `p -= lr * p.grad` in a loop over
  `model.parameters()`, or a statement updating a leaf name) is wrapped in `with torch.no_grad():`
  (the whole loop is re-indented). Anything else the loop computes is then no longer recorded by
  autograd.
- a statement `x.add_(y)` (or `x += y`) on an input of `forward` becomes `x = x.add(y)`
  (`x = x + y`): the caller's tensor is no longer modified, and the result is a new tensor, which
  costs memory and may broadcast to a different shape than the in-place form allowed.
There is no fix for in-place methods without an out-of-place twin (`zero_`, `fill_`, `copy_`,
`normal_`, ...) or for item assignment.

Not flagged: writes under `torch.no_grad()` / `torch.inference_mode()` (block or decorator, also in
a function this file only calls from such a block, through a method called on an argument of
unknown type too: `with torch.no_grad(): net.fuse()` when `fuse` is the only function of that
name in the file), writes to `.data`, `.detach()` or `.grad`
tensors (`p.grad.zero_()`), `torch.nn.init.*_` functions, tensors not known to require grad
(`torch.zeros(5)`, `torch.from_numpy(a)`), `nn.ReLU(inplace=True)` modules, temporaries, writes
guarded by an `inplace` flag, and parameters whose `requires_grad` was switched off (also for the
whole module in the same function: `fused = nn.Conv2d(...).requires_grad_(False)` then
`fused.weight.copy_(w)`, as conv-bn fusion does; measured on torch 2.13 to run).

## References
- https://pytorch.org/docs/stable/notes/autograd.html#in-place-operations-with-autograd
- https://pytorch.org/docs/stable/generated/torch.no_grad.html
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        found = autograd.mutation_target(sem, node)
        if found is None:
            return
        kind, target = found
        base = autograd.view_base(target)
        if sem.values.lexical_grad_mode(node) in (GRAD_OFF, GRAD_UNKNOWN):
            return  # inside `no_grad` (or a grad switch we cannot follow)
        written = sem.values.of(base)
        if (written.is_leaf_requiring_grad or written.alias is not None) and autograd.grad_is_off(sem, node):
            return  # every caller runs this under no_grad
        if written.is_leaf_requiring_grad:
            if not autograd.requires_grad_turned_off(sem, base, node):
                self._report_leaf(node, kind, base, written, self._leaf_passed_in(written, node, sem), ctx)
            return
        param = autograd.forward_input(sem, written, node) if isinstance(base, cst.Name) else None
        if param is not None:
            method = autograd.forward_method(sem, node)
            if kind != "method" and not autograd.param_is_tensor(sem, param, method):
                return
            if autograd.guarded_by_inplace_flag(sem, node):
                return
            self._report_input(node, kind, base, param, target, ctx)
            return
        call = self._leaf_passed_in(written, node, sem)
        if call is not None and not autograd.requires_grad_turned_off(sem, base, node):
            self._report_leaf(node, kind, base, written, call, ctx)

    def _leaf_passed_in(self, written, node, sem) -> Optional[cst.Call]:
        """A call of this helper that passes, for the parameter written here, a leaf that requires
        grad, outside no_grad: `init_table(self.emb.weight)` for `def init_table(E): E[0] = 1`."""
        param = written.alias
        function = sem.function_of(node)
        if type(param) is not cst.Param or function is None or param not in autograd._params(function):
            return None
        for call, binding in sem.values.call_sites(function):
            argument = binding.get(id(param))
            if argument is None or autograd.grad_is_off(sem, call):
                continue
            value = argument if isinstance(argument, Value) else sem.values.of(argument)
            if value.is_leaf_requiring_grad or isinstance(argument, Value) and value.kind == MODULE:
                return call  # a leaf passed in, or (`model.apply(fn)`) a module whose `.weight` is one
        return None

    # -- leaves ---------------------------------------------------------------------------------
    def _report_leaf(self, node, kind, base, written, call, ctx: RuleContext) -> None:
        what = "a parameter" if written.kind == PARAMETER else "a leaf tensor created with `requires_grad=True`"
        name = ctx.short(base, 30)
        error = "a view of a leaf Variable" if kind == "item" else "a leaf Variable"
        via = "" if call is None else f" (passed in by `{ctx.short(call, 40)}`)"
        message = (
            f"`{ctx.short(_shown(node), 50)}` writes in place into `{name}`{via}, {what}, outside `torch.no_grad()`: "
            f"autograd raises '{error} that requires grad is being used in an in-place operation'; "
            "do the update under `with torch.no_grad():`"
        )
        # Autograd raises at this line on every run.
        ctx.report(_shown(node), message, self._no_grad_fix(node, base, ctx), severity=Severity.ERROR)

    def _no_grad_fix(self, node, base, ctx: RuleContext) -> Optional[FixSpec]:
        sem = ctx.semantic
        statement = sem.statement_of(node)
        if statement is None:
            return None
        loop = None
        if isinstance(base, cst.Name):
            for binding in sem.scopes.lookup(base.value, base) or ():
                if binding.kind == "for" and isinstance(binding.node, cst.For) and \
                        sem.index.contains(binding.node.body, node):
                    loop = binding.node
        if loop is not None:
            if autograd.grad_is_off(sem, loop) or any(sem.is_backward_call(c) for c in sem.index.descendants(loop, cst.Call)):
                return None
            text = autograd.wrap_in_no_grad(sem, loop)
            target = loop
            if text is None:
                return None
        else:
            if not isinstance(statement, (cst.AugAssign, cst.Expr, cst.Assign)):
                return None
            text = autograd.wrap_in_no_grad(sem, statement)
            target = statement
            if text is None:
                return None
        return FixSpec("Wrap the update in `with torch.no_grad():`", (Replace(target, text),),
                       applicability=Applicability.UNSAFE)

    # -- inputs of forward ----------------------------------------------------------------------
    def _report_input(self, node, kind, base, param, target, ctx: RuleContext) -> None:
        name = base.value
        how = {"method": "modifies", "augassign": "updates", "item": "assigns into"}[kind]
        alias = "" if isinstance(target, cst.Name) and target.value == param.name.value else \
            f" (`{ctx.short(target, 30)}` shares memory with input `{param.name.value}`)"
        message = (
            f"`{ctx.short(_shown(node), 50)}` {how} `{name}` in place{alias}, an input of `forward` not rebound "
            "first: it silently changes the caller's tensor and breaks backward if autograd saved it; "
            f"write `{name} = {name}.clone()` first or use the out-of-place form"
        )
        # Harm depends on the caller (does it reuse the tensor?) and on what autograd saved.
        ctx.report(_shown(node), message, self._rebind_fix(node, kind, target, ctx), severity=Severity.WARNING)

    def _rebind_fix(self, node, kind, target, ctx: RuleContext) -> Optional[FixSpec]:
        if not isinstance(target, cst.Name):
            return None
        sem = ctx.semantic
        name = target.value
        if kind == "method":
            if not sem.is_expression_statement(node):
                return None
            method = node.func.attr.value
            if method not in autograd.INPLACE_WITH_OUT_OF_PLACE:
                return None
            call = node.with_changes(func=node.func.with_changes(attr=cst.Name(method[:-1])))
            code = ctx.code(call)
            if "\n" in code or "\r" in code:
                return None
            text = f"{name} = {code}"
            return FixSpec(f"Use `{name} = {name}.{method[:-1]}(...)`", (Replace(node, text),),
                           applicability=Applicability.UNSAFE)
        if kind == "augassign":
            operator = _AUGMENTED_OPERATORS.get(type(node.operator))
            if operator is None:
                return None
            value = ctx.code(node.value)
            if "\n" in value or "\r" in value:
                return None
            if not isinstance(node.value, _ATOMS):
                value = f"({value})"
            return FixSpec(f"Use `{name} = {name} {operator} ...`",
                           (Replace(node, f"{name} = {name} {operator} {value}"),),
                           applicability=Applicability.UNSAFE)
        return None


def _shown(node: cst.CSTNode) -> cst.CSTNode:
    """The node a finding points at: the call, the augmented assignment, the item target."""
    if isinstance(node, cst.AssignTarget):
        return node.target
    return node
