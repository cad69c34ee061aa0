"""TL114: sigmoid outputs fed to CrossEntropyLoss / NLLLoss."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation
from torchlint.analysis.semantic import Semantic, method_call
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


class SigmoidBeforeCrossEntropy(Rule):
    code = "TL114"
    name = "sigmoid-before-cross-entropy"
    summary = "Sigmoid output fed to `CrossEntropyLoss`/`NLLLoss`: the loss expects logits / log-probabilities"
    fix_availability = "sometimes"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: CrossEntropy/NLL of sigmoid outputs still trains, and since the sigmoid is
monotonic the predicted class (the argmax) is the one the logits give; but the loss has a floor
above 0 (1.87 for a perfectly confident prediction over 10 classes, measured on torch 2.13) and
the gradients shrink (about 0.2 times those of the loss on the logits), so training is slower and
the reported loss is misleading.
"""
    triggers = ("sigmoid", "Sigmoid", "expit")
    cross_file_triggers = True
    node_types = (cst.Call,)
    confirmation_module = "tl114"
    docs = """
## What it does
Flags the prediction argument of `nn.CrossEntropyLoss` (an instance built in this file),
`F.cross_entropy`, `nn.NLLLoss` or `F.nll_loss` when it certainly is the output of a sigmoid:
`torch.sigmoid(x)`, `F.sigmoid(x)`, `x.sigmoid()`, `nn.Sigmoid()(x)`, a variable assigned from
one of them, or the output of a model defined in the same file whose last layer is
`nn.Sigmoid`. The same value-model fact as TL108 (which covers softmax) decides it.

## Why is this bad?
`CrossEntropyLoss` applies `log_softmax` to its input; sigmoid outputs lie in (0, 1), so the
softmax over them is nearly uniform: the loss can never get close to 0 and its gradient is
squashed. Measured on torch 2.13: the gradient with respect to the logits is about 0.2 times the
one of the loss on the logits (16 samples, 10 classes), and for a perfectly confident prediction
(logit 20 for the right class, 0 elsewhere) the loss stays at 1.87 instead of 0. `NLLLoss` takes
log-probabilities; sigmoid outputs are neither. The model trains slowly towards a wrong optimum.
(For multi-label targets the loss is `BCEWithLogitsLoss` on the logits.)

## Example
```python
criterion = nn.CrossEntropyLoss()
loss = criterion(torch.sigmoid(logits), target)
```

Use instead:
```python
loss = criterion(logits, target)
```

## Fix safety
When the sigmoid is written inside a `CrossEntropyLoss`/`cross_entropy` call, the fix passes its
argument (the logits) instead. It is unsafe: the loss values and the training change (that is
the point). A sigmoid held in a variable or applied by the model is left alone, and so is
`NLLLoss` (which activation was meant is the author's choice).

## References
- https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html
- https://pytorch.org/docs/stable/generated/torch.nn.BCEWithLogitsLoss.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        kind = evaluation.classification_loss_kind(sem, node)
        if kind is None:
            return
        argument = evaluation.loss_input(node)
        source = evaluation.activation_output(sem, argument, "sigmoid")
        if source is None:
            return
        loss = "CrossEntropyLoss" if kind == "ce" else "NLLLoss"
        expects = "logits" if kind == "ce" else "log-probabilities"
        via = "" if source is argument else f" (`{ctx.short(source, 40)}`)"
        advice = "pass the logits" if kind == "ce" else "use `log_softmax` on the logits"
        ctx.report(
            argument,
            f"`{ctx.short(argument, 40)}` is a sigmoid output{via} fed to {loss}, which expects "
            f"{expects}: the loss cannot approach 0 and gradients shrink (the argmax is unchanged); {advice}",
            _fix(sem, kind, argument, source), severity=Severity.WARNING)


def _fix(sem: Semantic, kind: str, argument, source) -> Optional[FixSpec]:
    if kind != "ce" or source is not argument or not isinstance(argument, cst.Call):
        return None
    if sem.qualified_name(argument.func) in evaluation.ACTIVATIONS["sigmoid"]["functions"]:
        if len(argument.args) != 1 or argument.args[0].keyword is not None or argument.args[0].star:
            return None
        logits = argument.args[0].value
    elif method_call(argument, "sigmoid") and sem.qualified_name(argument.func) is None and not argument.args:
        logits = argument.func.value
    else:
        return None
    return FixSpec("Pass the logits instead of their sigmoid", (Replace(argument, logits),),
                   Applicability.UNSAFE)


__all__ = ["SigmoidBeforeCrossEntropy"]
