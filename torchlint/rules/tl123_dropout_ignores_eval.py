"""TL123: dropout that `model.eval()` cannot turn off: an `nn.Dropout` built inside `forward`, or
`F.dropout` in `forward` without `training=`."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# The functional forms whose `training` defaults to True (measured on torch 2.13:
# `F.alpha_dropout` and `F.feature_alpha_dropout` default to False and are left alone).
_FUNCTIONAL = {
    "torch.nn.functional.dropout": "dropout",
    "torch.nn.functional.dropout1d": "dropout1d",
    "torch.nn.functional.dropout2d": "dropout2d",
    "torch.nn.functional.dropout3d": "dropout3d",
}
# The module classes and the functional form a fix calls instead.
_MODULES = {
    "Dropout": "dropout", "Dropout1d": "dropout1d", "Dropout2d": "dropout2d", "Dropout3d": "dropout3d",
    "AlphaDropout": "alpha_dropout", "FeatureAlphaDropout": "feature_alpha_dropout",
}
_REGISTERING = frozenset({"add_module", "register_module", "setattr"})


class DropoutIgnoresEval(Rule):
    code = "TL123"
    name = "dropout-ignores-eval"
    summary = "Dropout that `model.eval()` cannot switch off: `nn.Dropout` built in `forward`, `F.dropout` without `training=`"
    fix_availability = "sometimes"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: evaluation and inference keep dropping activations at random (and scaling the rest
by 1/(1-p)), so every metric and prediction of the model after `model.eval()` is computed by a
randomly thinned network.
"""
    triggers = ("forward",)
    node_types = (cst.Call,)
    confirmation_module = "tl123"
    docs = """
## What it does
Flags, inside the `forward` method of an `nn.Module` subclass:

- the construction of a dropout module (`nn.Dropout(p)`, `nn.Dropout2d`, `nn.AlphaDropout`, ...)
  that is used there and then (`nn.Dropout(0.5)(x)`, `drop = nn.Dropout(p); x = drop(x)`);
- a call of `F.dropout`, `F.dropout1d`, `F.dropout2d` or `F.dropout3d` that passes no `training`
  argument.

Not flagged: a dropout module stored on the module (`self.drop = nn.Dropout(p)`, registered with
`add_module` / `setattr`), calls that pass `training=self.training` (or any `training`
argument), calls under `if self.training:`, `F.alpha_dropout` and `F.feature_alpha_dropout`
(their `training` defaults to False), and code outside `forward` (a deliberate
`F.dropout(scores, p, True)` for exploration).

## Why is this bad?
`model.eval()` switches dropout off by setting `training = False` on every registered submodule.
A dropout module built inside `forward` is not a submodule, and a new module starts in training
mode, so it keeps dropping. `F.dropout`'s `training` argument defaults to `True`: it never looks
at the module's mode. Measured on torch 2.13: after `model.eval()`, two calls on the same input
give different outputs (about half of the activations zeroed, the rest doubled, for p = 0.5),
while the same model with `self.drop = nn.Dropout(0.5)` gives identical outputs. Validation
accuracy, test metrics and predictions are those of a randomly thinned network.

## Example
```python
class Net(nn.Module):
    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = nn.Dropout(0.5)(x)
        return self.fc2(F.dropout(x, 0.2))
```

Use instead:
```python
class Net(nn.Module):
    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.dropout(x, 0.5, training=self.training)
        return self.fc2(F.dropout(x, 0.2, training=self.training))
```

## Fix safety
Unsafe: `F.dropout(x, p)` gains `training=self.training`, and `nn.Dropout(p)(x)` becomes
`torch.nn.functional.dropout(x, p, training=self.training)` (when the file imports `torch`). Both
change what the model computes in evaluation mode, which is the point, but it changes results.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.functional.dropout.html
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        name = sem.qualified_name(node.func)
        if name is None:
            return
        functional = _FUNCTIONAL.get(name)
        member = api.torch_member(name) if functional is None and api.is_nn_module_class(name) else None
        if functional is None and member not in _MODULES:
            return
        if not sem.is_module_method(node, "forward") or _under_training_test(sem, node):
            return
        this = _self_name(sem, node)
        if functional is not None:
            if _argument(node, 2, "training") is not None or any(a.star for a in node.args):
                return
            fix = None
            if this is not None:
                fix = FixSpec(f"Pass `training={this}.training`", (Replace(node, _with_training(node, this)),),
                              Applicability.UNSAFE)
            ctx.report(node, f"`{ctx.short(node, 40)}` passes no `training`, which defaults to True: it drops "
                             f"activations also after `model.eval()`, so evaluation and inference run a randomly "
                             f"thinned network; pass `training={this or 'self'}.training`", fix,
                       severity=Severity.ERROR)
            return
        if _stored(sem, node):
            return
        fix = None
        parent = sem.parent(node)
        if isinstance(parent, cst.Call) and parent.func is node and this is not None \
                and _torch_name(sem) is not None and len(parent.args) == 1 and parent.args[0].keyword is None \
                and not parent.args[0].star and _simple_construction(node):
            p = _argument(node, 0, "p")
            text = (f"{_torch_name(sem)}.nn.functional.{_MODULES[member]}({ctx.code(parent.args[0].value)}, "
                    f"{ctx.code(p) if p is not None else '0.5'}, training={this}.training)")
            fix = FixSpec(f"Use the functional dropout with `training={this}.training`",
                          (Replace(parent, text),), Applicability.UNSAFE)
        ctx.report(node, f"`{ctx.short(node, 40)}` builds a new {member} on every `forward` call: it is not a "
                         f"submodule, so `model.eval()` never reaches it and it keeps dropping activations in "
                         f"evaluation and inference; build it once in `__init__` (`self.drop = "
                         f"{ctx.short(node, 30)}`) or use `F.{_MODULES[member]}(x, p, "
                         f"training={this or 'self'}.training)`", fix, severity=Severity.ERROR)


def _argument(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
    for argument in call.args:
        if argument.keyword is not None and argument.keyword.value == keyword:
            return argument.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if len(positional) > position else None


def _simple_construction(call: cst.Call) -> bool:
    """`nn.Dropout()`, `nn.Dropout(p)`, `nn.Dropout(p=...)`: nothing a functional call would lose."""
    return all(not a.star and (a.keyword is None or a.keyword.value == "p") for a in call.args) and len(call.args) <= 1


def _self_name(sem, node: cst.CSTNode) -> Optional[str]:
    method = sem.method_of(node)
    if method is None or not method.params.params:
        return None
    return method.params.params[0].name.value


def _torch_name(sem) -> Optional[str]:
    """The name `torch` itself is imported as in this file (`import torch`), or None."""
    for node in sem.index.nodes(cst.Import):
        for alias in node.names:
            if isinstance(alias.name, cst.Name) and alias.name.value == "torch":
                return alias.asname.name.value if alias.asname is not None else "torch"
    return None


def _under_training_test(sem, node: cst.CSTNode) -> bool:
    """Inside an `if` (or a conditional expression) whose test reads `.training`."""
    function = sem.function_of(node)
    for ancestor in sem.ancestors(node):
        if ancestor is function:
            return False
        test = getattr(ancestor, "test", None) if isinstance(ancestor, (cst.If, cst.IfExp)) else None
        if test is not None and any(a.attr.value == "training" for a in sem.index.descendants(test, cst.Attribute)) \
                or isinstance(test, cst.Attribute) and test.attr.value == "training":
            return True
    return False


def _stored(sem, call: cst.Call) -> bool:
    """`self.drop = nn.Dropout(p)`, `self.add_module("drop", nn.Dropout(p))`,
    `setattr(self, name, nn.Dropout(p))`: a submodule from then on."""
    statement = sem.statement_of(call)
    if isinstance(statement, cst.Assign) and statement.value is call and all(
            isinstance(t.target, (cst.Attribute, cst.Subscript)) for t in statement.targets):
        return True
    parent = sem.parent(sem.parent(call))  # Arg -> Call
    return isinstance(parent, cst.Call) and (
        (isinstance(parent.func, cst.Attribute) and parent.func.attr.value in _REGISTERING)
        or (isinstance(parent.func, cst.Name) and parent.func.value in _REGISTERING))


def _with_training(call: cst.Call, this: str) -> cst.Call:
    args = list(call.args)
    if args:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(cst.Arg(value=cst.Attribute(value=cst.Name(this), attr=cst.Name("training")),
                        keyword=cst.Name("training"),
                        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                              whitespace_after=cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


__all__ = ["DropoutIgnoresEval"]
