"""Facts about PyTorch 0.3–1.0 APIs for the legacy rules (TL201–TL208): the losses that still
take `size_average=`/`reduce=` and what those mean as `reduction=`, literal flags, and rebuilding
a call's argument list for a fix.

Signatures are torch 2.13's (`inspect.signature`), kept here as data so that linting never
imports torch.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Protocol, Sequence, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState

from torchlint.positions import block_indents


class SemanticModel(Protocol):
    """What this module asks of the semantic model (`torchlint.analysis.semantic.Semantic`, not
    imported: it builds the value model, which uses this module)."""

    module: cst.Module

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        ...

    def qualified_name(self, node: cst.CSTNode) -> Optional[str]:
        ...


LEGACY_REDUCTION_ARGS = ("size_average", "reduce")
_R = ("size_average", "reduce", "reduction")

# torch.nn loss classes taking `size_average`/`reduce`: their parameters in order (torch 2.13).
_LOSS_CLASSES: Dict[str, Tuple[str, ...]] = {
    "BCELoss": ("weight", *_R),
    "BCEWithLogitsLoss": ("weight", *_R, "pos_weight"),
    "CosineEmbeddingLoss": ("margin", *_R),
    "CrossEntropyLoss": ("weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing"),
    "HingeEmbeddingLoss": ("margin", *_R),
    "KLDivLoss": (*_R, "log_target"),
    "L1Loss": _R,
    "MSELoss": _R,
    "MarginRankingLoss": ("margin", *_R),
    "MultiLabelMarginLoss": _R,
    "MultiLabelSoftMarginLoss": ("weight", *_R),
    "MultiMarginLoss": ("p", "margin", "weight", *_R),
    "NLLLoss": ("weight", "size_average", "ignore_index", "reduce", "reduction"),
    "NLLLoss2d": ("weight", "size_average", "ignore_index", "reduce", "reduction"),
    "PoissonNLLLoss": ("log_input", "full", "size_average", "eps", "reduce", "reduction"),
    "SmoothL1Loss": (*_R, "beta"),
    "SoftMarginLoss": _R,
    "TripletMarginLoss": ("margin", "p", "eps", "swap", *_R),
}
# torch.nn.functional losses taking them.
_LOSS_FUNCTIONS: Dict[str, Tuple[str, ...]] = {
    "binary_cross_entropy": ("input", "target", "weight", *_R),
    "binary_cross_entropy_with_logits": ("input", "target", "weight", *_R, "pos_weight"),
    "cosine_embedding_loss": ("input1", "input2", "target", "margin", *_R),
    "cross_entropy": ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                      "label_smoothing"),
    "hinge_embedding_loss": ("input", "target", "margin", *_R),
    "kl_div": ("input", "target", *_R, "log_target"),
    "l1_loss": ("input", "target", *_R, "weight"),
    "margin_ranking_loss": ("input1", "input2", "target", "margin", *_R),
    "mse_loss": ("input", "target", *_R, "weight"),
    "multi_margin_loss": ("input", "target", "p", "margin", "weight", *_R),
    "multilabel_margin_loss": ("input", "target", *_R),
    "multilabel_soft_margin_loss": ("input", "target", "weight", *_R),
    "nll_loss": ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction"),
    "poisson_nll_loss": ("input", "target", "log_input", "full", "size_average", "eps", "reduce", "reduction"),
    "smooth_l1_loss": ("input", "target", *_R, "beta"),
    "soft_margin_loss": ("input", "target", *_R),
    "triplet_margin_loss": ("anchor", "positive", "negative", "margin", "p", "eps", "swap", *_R),
}

UNKNOWN = object()  # a flag whose value is not a literal


def loss_parameters(sem: "SemanticModel", call: cst.Call) -> Optional[Tuple[str, ...]]:
    """The parameter names of the torch loss class or function `call` calls, when it is one that
    takes `size_average`/`reduce`."""
    name = sem.qualified_name(call.func)
    if name is None:
        return None
    parts = name.split(".")
    if parts[:3] == ["torch", "nn", "functional"] and len(parts) == 4:
        return _LOSS_FUNCTIONS.get(parts[3])
    if parts[:2] == ["torch", "nn"] and (len(parts) == 3 or parts[2:4] == ["modules", "loss"] and len(parts) == 5):
        return _LOSS_CLASSES.get(parts[-1])
    return None


def bound_arguments(call: cst.Call, parameters: Sequence[str]) -> Optional[Dict[str, cst.Arg]]:
    """Parameter name -> the argument passed for it; None when `*args`/`**kwargs` hide which."""
    bound: Dict[str, cst.Arg] = {}
    position = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            bound[arg.keyword.value] = arg
            continue
        if position >= len(parameters):
            return None
        bound[parameters[position]] = arg
        position += 1
    return bound


def literal_flag(expr: cst.BaseExpression):
    """True/False/None for the literals `True`, `False`, `None`, `0`, `1`; else UNKNOWN."""
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None") and not expr.lpar:
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, cst.Integer) and expr.value in ("0", "1"):
        return expr.value == "1"
    return UNKNOWN


def reduction_for(size_average, reduce) -> str:
    """What torch makes of the legacy flags (torch/nn/_reduction.py `legacy_get_string`): a flag
    left out (None) counts as True; `reduce=False` wins over `size_average`."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if size_average and reduce:
        return "mean"
    return "sum" if reduce else "none"


def effective_reduction(sem: "SemanticModel", call: cst.Call) -> Optional[str]:
    """The reduction a torch loss construction or functional loss call applies ("mean", "sum",
    "none"), or None when it cannot be told from the literals written."""
    parameters = loss_parameters(sem, call)
    if parameters is not None:
        bound = bound_arguments(call, parameters)
    elif any(arg.star or arg.keyword is None and isinstance(arg.value, cst.BaseString) for arg in call.args):
        return None  # a loss not in the table (`nn.HuberLoss("none")`): the position is unknown
    else:
        bound = {arg.keyword.value: arg for arg in call.args if arg.keyword is not None}
    if bound is None:
        return None
    flags = {}
    for name in LEGACY_REDUCTION_ARGS:
        if name in bound:
            flags[name] = literal_flag(bound[name].value)
            if flags[name] is UNKNOWN:
                return None
    if any(value is not None for value in flags.values()):
        return reduction_for(flags.get("size_average"), flags.get("reduce"))
    if "reduction" not in bound:
        return "mean"
    value = bound["reduction"].value
    if isinstance(value, cst.SimpleString) and value.evaluated_value in ("mean", "sum", "none"):
        return value.evaluated_value
    return None


# -- rebuilding calls for fixes -----------------------------------------------------------------

def keyword_argument(name: str, value: cst.BaseExpression) -> cst.Arg:
    return cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )


def with_arguments(call: cst.Call, args: List[cst.Arg]) -> cst.Call:
    """`call` with `args`, separated by the commas they had (", " where one had none), and the
    original trailing comma (or its absence) after the last."""
    if not args:
        return call.with_changes(args=())
    last_comma = call.args[-1].comma if call.args else cst.MaybeSentinel.DEFAULT
    fixed = []
    for position, arg in enumerate(args):
        if position < len(args) - 1:
            comma = arg.comma if isinstance(arg.comma, cst.Comma) else cst.Comma(
                whitespace_after=cst.SimpleWhitespace(" "))
        else:
            comma = last_comma
        fixed.append(arg.with_changes(comma=comma))
    return call.with_changes(args=fixed)


def render_in_place(sem: "SemanticModel", original: cst.CSTNode, replacement: cst.CSTNode) -> str:
    """`replacement`'s code as it would read where `original` stands (its lines indented like
    the blocks around `original`), for a Replace edit of `original`. A Replace edit covers a
    node without its own parentheses, so the replacement is rendered without them."""
    if getattr(replacement, "lpar", None):
        replacement = replacement.with_changes(lpar=(), rpar=())
    module = sem.module
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens = block_indents(module, sem.ancestors(original))
    replacement._codegen(state)
    return "".join(state.tokens)
