"""TL110: an out-of-place tensor operation as a statement: its result is thrown away."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import silent
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


class DiscardedTensorResult(Rule):
    code = "TL110"
    name = "discarded-tensor-result"
    summary = "Out-of-place tensor op as a statement (`x.to(device)`, `F.dropout(h)`): its result is lost"
    fix_availability = "sometimes"
    default_severity = Severity.WARNING
    severity_docs = """
An **error** when the name whose result was thrown away is read later (also on the next loop
iteration): the program goes on with the unchanged value (a batch left on the host, dropout never
applied). A **note** when it is a local that is never read again, and when a discarded device
move's later reader is a model the function builds and never moves (`x.cuda()` then `D(x)` with
`D = Discriminator(...)`: both stay on the CPU, and the program runs as without the line; no fix
then, since assigning alone would move the input away from the model). A **warning** otherwise.
"""
    # every finding needs a tensor or a torch function, so an import of torch
    triggers = ("torch",)
    cross_file_triggers = True
    node_types = (cst.Call,)
    confirmation_module = "tl110"
    docs = """
## What it does
Flags an expression statement that applies an out-of-place torch operation to a tensor and
keeps nothing: `x.to(device)`, `x.cuda()`, `x.float()`, `x.t()`, `x.view(-1, 784)`,
`torch.relu(x)`, `F.dropout(h, 0.5, self.training)`. A method counts only when the analysis
knows the receiver is a tensor (a loader's batch, a factory's result, a model's output, a
parameter); `model.to(device)`, `model.cuda()` and `model.float()` change an `nn.Module` in place
and stay silent, as do in-place methods (`x.add_(1)`, `x.clamp_(0, 1)`), calls with `out=` or
`inplace=True`, and receivers of unknown type (also a value of unknown type passed through a
method modules share, `model = model.to(device)` of a parameter `model`). Top-level statements
of a notebook are left alone (Jupyter displays a cell's last value), and so are statements under
`with torch.profiler.profile()`, `record_function`, a timer, or in a function named for
benchmarking or warm-up (the op runs to be measured).

Severity: an error when the tensor is a plain name read later in the same function without
being rebound (the program goes on with the unchanged value: a batch left on the host while the
model is on the GPU, dropout that is never applied); a note when the name is a local that is
never read again (the line is dead code); a warning otherwise (an attribute, or a parameter whose
caller may expect the change).

## Why is this bad?
`Tensor.to`, `.cuda()`, `.float()`, `.view()` and the functions of `torch` and
`torch.nn.functional` return a new tensor and leave their input as it was. Measured on torch
2.13: after `F.dropout(h, 0.5, True)` as a statement, `h` has no zero (no dropout at all);
after `x.to("meta")`, `x.device` is still `cpu` and a model on the meta device fails with
`Tensor on device meta is not on the expected device cpu!`. On a GPU the same line gives
`Expected all tensors to be on the same device`. The line also hides the unmoved batch from
TL007, which treats a bare `batch.to(device)` as a possible in-place move (some batch objects,
such as Hugging Face's `BatchEncoding`, do move in place).

## Example
```python
for x, y in loader:
    x.to(device)
    y.to(device)
    out = model(x)

def forward(self, x):
    h = F.relu(self.fc1(x))
    F.dropout(h, 0.5, self.training)
    return self.fc2(h)
```

Use instead:
```python
for x, y in loader:
    x = x.to(device)
    y = y.to(device)
    out = model(x)

def forward(self, x):
    h = F.relu(self.fc1(x))
    h = F.dropout(h, 0.5, self.training)
    return self.fc2(h)
```

## Fix safety
When the tensor is a plain name, the fix assigns the result back to it (`x = x.to(device)`).
It is safe when nothing reads the name afterwards, nor a function nested in the same scope (only
a dead binding is added), and unsafe when something does: the later code then gets the converted
tensor (the point of the fix), so the program's results change.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.to.html
- https://pytorch.org/docs/stable/generated/torch.nn.functional.dropout.html
- https://pytorch.org/docs/stable/notes/cuda.html
"""

    def candidates(self, node_type, semantic):
        # Only a call that is a whole statement discards its result.
        return [statement.value for statement in semantic.index.nodes(cst.Expr) if type(statement.value) is cst.Call]

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if not sem.is_expression_statement(node):
            return
        found = silent.discarded_operation(sem, node)
        if found is None:
            return
        operation, tensor = found
        if _in_place_on_the_way(node):
            return  # `y.scatter_(1, idx, 1).float()`: the statement runs for the in-place write
        statement = sem.statement_of(node)
        if ctx.path.endswith(".ipynb") and sem.function_of(node) is None and not sem.enclosing_loops(node):
            return  # a cell's last value is displayed
        if silent.measured_on_purpose(sem, node):
            return  # run under a profiler or a timer: the op is the point, not its result
        severity = Severity.WARNING
        later = None
        if isinstance(tensor, cst.Name):
            later = silent.read_later(sem, tensor, statement)
            if later is not None:
                severity = Severity.ERROR
            elif _local_never_escaping(sem, tensor):
                severity = Severity.NOTE
        spelled = ctx.short(tensor, 30)
        call_text = ctx.short(node, 50)
        model = _cpu_model_reading(sem, later) if later is not None and operation in ("cuda", "to") else None
        if model is not None:
            # `x.cuda()` thrown away before `D(x)` where `D` is built here and never moved: both
            # stay on the CPU, so the program runs as it would have without the line.
            severity = Severity.NOTE
            consequence = (f"`{ctx.short(sem.statement_of(later), 40)}` below goes on with the unchanged "
                           f"`{spelled}`, which matches `{model}` (built here and never moved: both stay on the CPU)")
        elif later is not None:
            consequence = (f"`{ctx.short(sem.statement_of(later), 40)}` below goes on with the "
                           f"unchanged `{spelled}`")
        else:
            consequence = "the line does nothing"
        fix = None
        if isinstance(tensor, cst.Name):
            # nothing reads the name afterwards (nor a nested function): the new binding is dead
            dead = later is None and not _read_in_nested_function(sem, tensor)
            fix = FixSpec(f"Assign the result: `{tensor.value} = {call_text}`",
                          (Replace(node, f"{tensor.value} = {ctx.code(node)}"),),
                          Applicability.SAFE if dead else Applicability.UNSAFE)
        assign = f"`{tensor.value} = {call_text}`" if isinstance(tensor, cst.Name) else "assign the result"
        if model is not None:
            fix = None  # assigning alone would move the input away from the model
            assign = f"delete the line, or move `{model}` too and assign the result ({assign})"
        ctx.report(
            node,
            f"`{call_text}` returns a new tensor and leaves `{spelled}` unchanged; the result is "
            f"thrown away and {consequence}: {assign}",
            fix, severity=severity)


def _in_place_on_the_way(call: cst.Call) -> bool:
    """An in-place method in the receiver chain of the discarded call (`t.zero_().float()`,
    `y.scatter_(...).long()`): the line writes the tensor, so it does something."""
    expr = call.func.value if isinstance(call.func, cst.Attribute) else None
    while isinstance(expr, (cst.Call, cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            name = expr.func.attr.value
            if name.endswith("_") and not name.endswith("__"):
                return True
            expr = expr.func.value
        elif isinstance(expr, cst.Call):
            return False
        else:
            expr = expr.value
    return False


def _cpu_model_reading(sem, later: cst.CSTNode) -> Optional[str]:
    """`D` when the later read is an argument of `D(...)` and `D` is a local name of the function
    bound once to a call, never moved (`D.cuda()`, `D.to(...)`, `D = D.to(...)`) there."""
    call = sem.parent(later)
    if isinstance(call, cst.Arg):
        call = sem.parent(call)
    if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)):
        return None
    name = call.func.value
    function = sem.function_of(call)
    if function is None:
        return None
    bindings = [a for a in sem.index.descendants(function, cst.Assign)
                if any(isinstance(t.target, cst.Name) and t.target.value == name for t in a.targets)]
    if len(bindings) != 1 or not isinstance(bindings[0].value, cst.Call):
        return None
    for node in sem.index.descendants(function, cst.Attribute):
        if isinstance(node.value, cst.Name) and node.value.value == name and \
                node.attr.value in ("cuda", "to", "to_empty", "xpu", "mps", "apply", "load_state_dict"):
            return None
    return name


def _read_in_nested_function(sem, name: cst.Name) -> bool:
    scope = sem.function_of(name)
    body = scope if scope is not None else sem.module
    return any(sem.function_of(n) is not scope for n in sem.index.names_under(body, name.value))


def _local_never_escaping(sem, name: cst.Name) -> bool:
    """Every binding reaching `name` is a local assignment or loop target of a function (not a
    parameter, not module-level code another module may read)."""
    definitions = sem.values.flow.reaching(name)
    if not definitions or sem.function_of(name) is None:
        return False
    return all(d.kind in ("assign", "for", "with", "augassign", "walrus") for d in definitions)


__all__ = ["DiscardedTensorResult"]
