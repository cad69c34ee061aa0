"""TL108: probabilities from softmax fed to CrossEntropyLoss / NLLLoss."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import evaluation
from torchlint.analysis.semantic import Semantic, method_call
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

_LOG_SOFTMAX = {
    "torch.softmax": "torch.log_softmax",
    "torch.nn.functional.softmax": "log_softmax",
    "torch.special.softmax": "torch.special.log_softmax",
}


class SoftmaxBeforeCrossEntropy(Rule):
    code = "TL108"
    name = "softmax-before-cross-entropy"
    summary = "Softmax output fed to `CrossEntropyLoss`/`NLLLoss`: the loss expects logits / log-probabilities"
    fix_availability = "sometimes"
    triggers = ("softmax", "Softmax")
    cross_file_triggers = True
    node_types = (cst.Call,)
    confirmation_module = "tl108"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: CrossEntropyLoss/NLLLoss on softmax probabilities computes the wrong
loss on every batch: gradients shrink and training stalls (or, where nothing is backpropagated,
the reported loss is wrong).
"""
    docs = """
## What it does
Flags the prediction argument of `nn.CrossEntropyLoss` (an instance built in this file),
`F.cross_entropy`, `nn.NLLLoss` or `F.nll_loss` when it certainly is the output of a softmax:
`F.softmax(x)`, `torch.softmax(x)`, `x.softmax(dim)`, `nn.Softmax(dim)(x)`, a variable assigned
from one of them, or the output of a model defined in the same file whose last layer is
`nn.Softmax` (an `nn.Sequential` ending in it, or a `forward` that returns a softmax).

## Why is this bad?
`CrossEntropyLoss` applies `log_softmax` itself; given probabilities it computes
`log_softmax(softmax(x))`, whose inputs lie in [0, 1], so the loss can never get close to 0 and
its gradient is squashed: training stalls or converges slowly. The confirmation case measures
the gradient norm with respect to the logits against the one of the loss on the logits
(a ratio well below 1 on torch 2.13). `NLLLoss` expects log-probabilities: given probabilities
it maximises the probability linearly instead of its log, also with vanishing gradients.

## Example
```python
criterion = nn.CrossEntropyLoss()
loss = criterion(F.softmax(logits, dim=1), target)
loss = F.nll_loss(F.softmax(logits, dim=1), target)
```

Use instead:
```python
loss = criterion(logits, target)
loss = F.nll_loss(F.log_softmax(logits, dim=1), target)
```

## Fix safety
When the softmax call is written inside the loss call, the fix removes it for
`CrossEntropyLoss`/`cross_entropy` (passing the logits) and turns it into `log_softmax` for
`NLLLoss`/`nll_loss`. It is unsafe: the loss values and the training dynamics change (that is
the point). A softmax held in a variable or applied by the model is left alone: the
probabilities may be used elsewhere.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html
- https://pytorch.org/docs/stable/generated/torch.nn.NLLLoss.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        kind = evaluation.classification_loss_kind(sem, node)
        if kind is None:
            return
        argument = evaluation.loss_input(node)
        source = evaluation.activation_output(sem, argument, "softmax")
        if source is None:
            return
        loss = "CrossEntropyLoss" if kind == "ce" else "NLLLoss"
        if kind == "ce":
            advice = "pass the logits (it applies log_softmax itself)"
        else:
            advice = "use `log_softmax` instead of `softmax`"
        model = evaluation.activation_in_model(sem, source, node)
        if model is not None:
            if kind == "ce":
                advice = (f"the softmax is applied inside the model{model}: make the model return "
                          "the logits (drop that softmax) and apply softmax only where probabilities "
                          "are needed")
            else:
                advice = (f"the softmax is applied inside the model{model}: use `log_softmax` there")
        via = "" if source is argument else f" (`{ctx.short(source, 40)}`)"
        trains = evaluation.backpropagated_anywhere(sem, node)
        harm = "gradients shrink and training stalls" if trains else "the loss it reports is wrong"
        ctx.report(
            argument,
            f"`{ctx.short(argument, 40)}` is a softmax output{via} fed to {loss}, which expects "
            f"{'logits' if kind == 'ce' else 'log-probabilities'}: {harm}; {advice}",
            _fix(sem, kind, argument, source),
            # The loss is computed on the wrong quantity on every batch: trains (or evaluates) wrongly.
            severity=Severity.ERROR,
        )


def _fix(sem: Semantic, kind: str, argument, source) -> Optional[FixSpec]:
    if source is not argument or not isinstance(argument, cst.Call):
        return None
    if kind == "ce":
        if sem.is_torch(argument, *_LOG_SOFTMAX):
            if not argument.args or argument.args[0].keyword is not None:
                return None
            logits = argument.args[0].value
        elif method_call(argument, "softmax") and sem.qualified_name(argument.func) is None:
            logits = argument.func.value
        else:
            return None
        return FixSpec("Pass the logits instead of their softmax", (Replace(argument, logits),),
                       Applicability.UNSAFE)
    if method_call(argument, "softmax"):
        return FixSpec("Use `log_softmax`", (Replace(argument.func.attr, "log_softmax"),),
                       Applicability.UNSAFE)
    name = sem.qualified_name(argument.func)
    if name in _LOG_SOFTMAX and isinstance(argument.func, cst.Attribute):
        return FixSpec("Use `log_softmax`", (Replace(argument.func.attr, "log_softmax"),),
                       Applicability.UNSAFE)
    return None
