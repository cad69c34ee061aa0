"""TL109: sigmoid followed by BCELoss instead of BCEWithLogitsLoss on the logits."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation, training
from torchlint.analysis.semantic import Semantic, method_call
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


class SigmoidBeforeBCE(Rule):
    code = "TL109"
    name = "sigmoid-before-bce"
    summary = "`sigmoid` then `BCELoss` saturates at large logits: use `BCEWithLogitsLoss` on the logits"
    fix_availability = "sometimes"
    triggers = ("sigmoid", "Sigmoid", "expit")
    cross_file_triggers = True
    node_types = (cst.Call,)
    confirmation_module = "tl109"
    severity_docs = """
A **warning** where the loss is backpropagated: sigmoid then BCELoss saturates only
at large logits (the loss clamps and the gradient vanishes), which depends on the data and how
training goes. A **note** where nothing backpropagates it (an evaluation, a file that never
trains): only the reported loss is clamped at saturation.
"""
    docs = """
## What it does
Flags the prediction argument of `nn.BCELoss` (an instance built in this file) or
`F.binary_cross_entropy` when it certainly is a sigmoid output: `torch.sigmoid(x)`,
`F.sigmoid(x)`, `x.sigmoid()`, `nn.Sigmoid()(x)`, a variable assigned from one of them, or the
output of a model defined in the same file whose last layer is `nn.Sigmoid`.

## Why is this bad?
In float32 `sigmoid(x)` rounds to exactly 1.0 for x above about 17 (and underflows towards 0
below about -88). `BCELoss` then clamps `log(0)` to -100: the loss saturates at 100 and the
gradient through the sigmoid is exactly 0, so confidently wrong predictions stop learning
(measured on torch 2.13 by the confirmation case: gradient 0 at logit 20 with target 0, against
1.0 with `BCEWithLogitsLoss`). `BCEWithLogitsLoss` fuses both steps with the log-sum-exp trick
and stays exact. It is also the only one of the two that is safe under autocast.

## Example
```python
loss = nn.BCELoss()(torch.sigmoid(logits), target)
loss = F.binary_cross_entropy(torch.sigmoid(logits), target)
```

Use instead:
```python
loss = nn.BCEWithLogitsLoss()(logits, target)
loss = F.binary_cross_entropy_with_logits(logits, target)
```

## Fix safety
When the sigmoid is written inside the call and the loss is `F.binary_cross_entropy(...)` or an
inline `nn.BCELoss(...)(...)`, the fix switches to the `..._with_logits` form on the logits. It is
unsafe: loss values differ where the old form saturated (that is the point), and `weight`
semantics are the same but `BCEWithLogitsLoss` also accepts `pos_weight`. Criteria held in
variables and sigmoids applied by the model are left alone.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.BCEWithLogitsLoss.html
- https://pytorch.org/docs/stable/generated/torch.nn.BCELoss.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        functional = sem.is_torch(node, *evaluation.BCE_FUNCTIONS)
        if not functional and not training.is_criterion(sem, node.func, evaluation.BCE_CLASSES):
            return
        argument = evaluation.loss_input(node)
        source = evaluation.activation_output(sem, argument, "sigmoid")
        if source is None:
            return
        via = "" if source is argument else f" (`{ctx.short(source, 40)}`)"
        model = evaluation.activation_in_model(sem, source, node)
        advice = "use `BCEWithLogitsLoss` / `binary_cross_entropy_with_logits` on the logits"
        if model is not None:
            advice = (f"the sigmoid is applied inside the model{model}: make the model return the "
                      f"logits (drop that sigmoid) and {advice}")
        if evaluation.backpropagated_anywhere(sem, node):
            harm = "at large logits the sigmoid saturates, the loss clamps and the gradient vanishes"
            severity = Severity.WARNING  # only where logits grow large: depends on data and training
        else:
            harm = ("nothing backpropagates it here, but at large logits the sigmoid saturates and the "
                    "loss it reports is clamped")
            severity = Severity.NOTE
        ctx.report(
            argument,
            f"`{ctx.short(argument, 40)}` is a sigmoid output{via} fed to BCELoss: {harm}; {advice}",
            _fix(sem, node, functional, argument, source),
            severity=severity,
        )


def _logits_of(sem: Semantic, call: cst.Call) -> Optional[cst.BaseExpression]:
    if sem.is_torch(call, *evaluation.ACTIVATIONS["sigmoid"]["functions"]):
        if len(call.args) == 1 and call.args[0].keyword is None:
            return call.args[0].value
        return None
    if method_call(call, "sigmoid") and not call.args and sem.qualified_name(call.func) is None:
        return call.func.value
    return None


def _fix(sem: Semantic, node: cst.Call, functional: bool, argument, source) -> Optional[FixSpec]:
    if source is not argument or not isinstance(argument, cst.Call):
        return None
    logits = _logits_of(sem, argument)
    if logits is None:
        return None
    if functional:
        if not isinstance(node.func, cst.Attribute):
            return None
        edits = (Replace(node.func.attr, "binary_cross_entropy_with_logits"), Replace(argument, logits))
    else:
        construction = node.func
        if not (isinstance(construction, cst.Call) and isinstance(construction.func, cst.Attribute)
                and construction.func.attr.value == "BCELoss"):
            return None
        edits = (Replace(construction.func.attr, "BCEWithLogitsLoss"), Replace(argument, logits))
    return FixSpec("Use the with-logits loss on the logits", edits, Applicability.UNSAFE)
