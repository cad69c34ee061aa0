"""TL120: `p.require_grad = False`, a typo of `requires_grad` that freezes nothing."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import value as v
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_TYPO = "require_grad"
_RIGHT = "requires_grad"
# Values whose attribute `requires_grad` is torch's switch; writing `require_grad` on them only
# adds a Python attribute. A module has no `requires_grad` at all (`requires_grad_()` is the method).
_TORCH_KINDS = v.TENSOR_KINDS | {v.MODULE}


class RequireGradTypo(Rule):
    code = "TL120"
    name = "require-grad-typo"
    summary = "`x.require_grad = ...` sets a new attribute and freezes nothing: the flag is `requires_grad`"
    fix_availability = "always"
    default_severity = Severity.WARNING
    severity_docs = """
An **error** when `require_grad = False` lands on a parameter or a module: nothing is frozen and it
keeps training. A **note** when it lands on the parameters of a loop `for p in
model.backbone.parameters():` that no optimizer of the file holds (every optimizer is built over
another part, `model.head.parameters()`): they are not updated anyway. A **note** on a tensor
made by a factory that never required grad (a positional
encoding), where the typo has no effect; a **warning** otherwise.
"""
    triggers = ("require_grad",)
    node_types = (cst.Assign, cst.AugAssign, cst.AnnAssign)
    confirmation_module = "tl120"
    docs = """
## What it does
Flags an assignment to an attribute spelled `require_grad` (`p.require_grad = False`,
`x.require_grad = True`), the common misspelling of `requires_grad`.

Not flagged: `requires_grad`; a plain variable called `require_grad`; an attribute
`require_grad` that the file also reads (`if self.require_grad:`, `getattr(cfg,
"require_grad")`) or declares in a class body, which is the program's own setting, not a typo;
`self.require_grad = ...` in a class that is not an `nn.Module` (a config object's field), and
`self.require_grad = <not a bool literal>` in a module (`= cfg.GRAD`: a setting stored for use
elsewhere).

## Why is this bad?
Tensors and modules accept any new Python attribute, so the typo raises nothing. Measured on
torch 2.13: after `p.require_grad = False` on a `nn.Linear` weight, `p.requires_grad` is still
`True`, the weight keeps receiving gradients and the optimizer keeps updating it. The layer the
author meant to freeze (a pretrained backbone in fine-tuning) is trained anyway, and nothing
reports it. The other direction, `x.require_grad = True` on a plain tensor, leaves `x` without
gradients: `x.grad` stays `None`, or `backward()` raises `element 0 of tensors does not require
grad`.

Severity from the facts: an error for `= False` on a parameter (a parameter of
`model.parameters()`, a tensor made with `requires_grad=True`) or on a module, which then keeps
training; a note for `= False` on a tensor that certainly does not require grad (`pe =
torch.zeros(...)` in positional encodings: the typo has no effect there); a warning otherwise
(`= True` on a plain tensor, which may or may not be wrapped in `nn.Parameter` later; a receiver
or value the analysis cannot pin down).

## Example
```python
for p in backbone.parameters():
    p.require_grad = False
```

Use instead:
```python
for p in backbone.parameters():
    p.requires_grad = False
# or: backbone.requires_grad_(False)
```

## Fix safety
The fix renames the attribute to `requires_grad`. It is unsafe: it changes what the program
does, on purpose (the layers become frozen), so the training run afterwards differs from before.
On a module (`model.require_grad = False`) the fix is `model.requires_grad_(False)`: a module has
no `requires_grad` attribute, and assigning one would again freeze nothing. No fix is offered for
an augmented or annotated assignment, or for a module whose value is not a plain expression.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.requires_grad.html
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.requires_grad_
- https://pytorch.org/docs/stable/notes/autograd.html#setting-requires-grad
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if isinstance(target, cst.Attribute) and target.attr.value == _TYPO:
                self._check_target(node, target, ctx)

    def _check_target(self, node: cst.CSTNode, target: cst.Attribute, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if _attribute_is_the_programs_own(sem):
            return
        receiver = target.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            klass = sem.class_of_method(sem.function_of(target))
            if klass is None or not sem.is_module_class(klass):
                return  # a field of a non-module class: that class's own setting
        is_self = isinstance(receiver, cst.Name) and receiver.value == "self"
        value = getattr(node, "value", None)
        literal = _bool(value)
        if is_self and literal is None:
            return  # `self.require_grad = cfg.GRAD` in a module: a setting stored for later use
        facts = sem.values.of(receiver)
        is_module = facts.kind == v.MODULE or is_self
        is_tensor = facts.kind in v.TENSOR_KINDS
        requires = facts.kind == v.PARAMETER or facts.autograd in (v.AG_LEAF, v.AG_REQUIRES)
        outside = None
        if (is_module or requires) and literal is False:
            outside = _optimizers_never_hold(sem, receiver, target)
        if outside is not None:
            severity, effect = Severity.NOTE, (
                f"freezes nothing, but no optimizer of this file holds these parameters (it is built over "
                f"`{outside}`): they are not updated anyway, only their gradients are computed needlessly")
        elif (is_module or requires) and literal is False:
            severity, effect = Severity.ERROR, "freezes nothing: it keeps training"
        elif is_tensor and facts.autograd == v.AG_NONE and literal is False:
            # `pe = torch.zeros(...); pe.require_grad = False`: no gradient either way
            severity, effect = Severity.NOTE, "has no effect (the tensor does not require grad anyway)"
        elif is_tensor and facts.autograd == v.AG_NONE and literal is True:
            severity, effect = Severity.WARNING, "does not make it require grad"
        else:
            severity, effect = Severity.WARNING, "changes nothing (`requires_grad` stays as it was)"
        what = "module" if is_module else ("tensor" if is_tensor else "object")
        right = "`.requires_grad_(...)`" if is_module else f"`{_RIGHT}`"
        ctx.report(
            target.attr,
            f"`{ctx.short(target, 40)}` is a typo: it adds a new attribute to the {what} and "
            f"{effect}; use {right}",
            _fix(node, target, is_module, ctx),
            severity=severity,
        )


def _optimizers_never_hold(sem, receiver: cst.BaseExpression, target: cst.Attribute) -> Optional[str]:
    """For `p.require_grad = False` in `for p in model.features.parameters():`, the parameters of
    the optimizers of the file when none can hold `model.features`'s: every `torch.optim.X(...)`
    is built over `Y.parameters()` where neither `Y` nor `model.features` is a part of the other
    (`model.classifier.parameters()`). None when some optimizer may hold them, or it is not known."""
    owner = _loop_owner(sem, receiver, target)
    if owner is None:
        return None
    optimizers = [call for call in sem.index.nodes(cst.Call)
                  if (sem.qualified_name(call.func) or "").startswith("torch.optim.")
                  and (sem.qualified_name(call.func) or "").rsplit(".", 1)[-1][:1].isupper()
                  and "lr_scheduler" not in (sem.qualified_name(call.func) or "")]
    if not optimizers:
        return None
    held = []
    for call in optimizers:
        first = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
        if not (isinstance(first, cst.Call) and isinstance(first.func, cst.Attribute)
                and first.func.attr.value == "parameters" and not first.args):
            return None  # a list, a filter, param groups: cannot tell
        spelled = sem.source(first.func.value)
        if _part_of(spelled, owner) or _part_of(owner, spelled):
            return None
        held.append(sem.source(first))
    return "`, `".join(held)


def _loop_owner(sem, receiver: cst.BaseExpression, target: cst.Attribute) -> Optional[str]:
    """`model.features` for `p` of `for p in model.features.parameters():` around `target`."""
    if not isinstance(receiver, cst.Name):
        return None
    for ancestor in sem.ancestors(target):
        if isinstance(ancestor, cst.For) and isinstance(ancestor.target, cst.Name) \
                and ancestor.target.value == receiver.value:
            it = ancestor.iter
            if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) \
                    and it.func.attr.value == "parameters" and not it.args:
                return sem.source(it.func.value)
            return None
    return None


def _part_of(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer + ".") or inner.startswith(outer + "[")


def _attribute_is_the_programs_own(sem) -> bool:
    """The file reads `.require_grad` somewhere, or declares it as a class attribute: a setting
    the program defines and uses, not a misspelt torch flag."""
    found = sem.__dict__.get("_tl120_own")
    if found is None:
        found = False
        for attribute in sem.index.nodes(cst.Attribute):
            if attribute.attr.value != _TYPO:
                continue
            parent = sem.parent(attribute)
            written = (isinstance(parent, cst.AssignTarget) and parent.target is attribute) or (
                isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is attribute)
            if not written:
                found = True
                break
        if not found:
            for string in sem.index.nodes(cst.SimpleString):
                if string.value.strip("\"'") == _TYPO:  # getattr(cfg, "require_grad")
                    found = True
                    break
        if not found:
            for klass in sem.index.nodes(cst.ClassDef):
                for statement in klass.body.body:
                    if _declares(statement):
                        found = True
        sem.__dict__["_tl120_own"] = found
    return found


def _declares(statement: cst.CSTNode) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Assign) and any(
                isinstance(t.target, cst.Name) and t.target.value == _TYPO for t in small.targets):
            return True
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) \
                and small.target.value == _TYPO:
            return True
    return False


def _bool(node) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def _fix(node: cst.CSTNode, target: cst.Attribute, is_module: bool, ctx: RuleContext) -> Optional[FixSpec]:
    if not isinstance(node, cst.Assign) or len(node.targets) != 1:
        return None
    if not is_module:
        return FixSpec(f"Use `{_RIGHT}`", (Replace(target.attr, _RIGHT),), Applicability.UNSAFE)
    statement = ctx.semantic.parent(node)
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    call = f"{ctx.code(target.value)}.requires_grad_({ctx.code(node.value)})"
    return FixSpec("Use `.requires_grad_(...)`", (Replace(node, call),), Applicability.UNSAFE)
