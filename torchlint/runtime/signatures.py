"""What `torchlint run` maps runtime observations to: rule code -> (title, how it is recognised).

Some codes belong to rules that live on other branches or are not written yet (TL007-TL009,
TL201-TL208). The runtime never imports rule modules: it recognises each code by what happens
when the code runs (an exception's type and message, a warning's text, or a detector's own
observation), so this table is the only place that knows them. No torch here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Optional, Pattern, Tuple


@dataclass(frozen=True)
class Code:
    title: str
    recognised_by: str


CODES: Dict[str, Code] = {
    "TL001": Code("in-place operation on a tensor autograd needs",
                  "a forward that bumps the version counter of one of its tensor inputs; the error "
                  "'a leaf Variable that requires grad is being used in an in-place operation'; the "
                  "backward error 'modified by an inplace operation', traced to the in-place op"),
    "TL002": Code("gradients accumulate across optimizer steps",
                  "a parameter's .grad reaches a step still holding the previous step's gradient "
                  "(not set to None or zeroed in between); or every gradient is cleared between "
                  "backward and step"),
    "TL003": Code("loss tensors of earlier iterations kept alive with their graphs",
                  "criterion outputs (modules named *Loss, torch.nn.functional losses, tensors "
                  "backward() is called on) tracked by weak reference and alive with grad_fn from "
                  "two or more earlier steps, or a running sum of them spanning steps"),
    "TL004": Code(".view() on a non-contiguous tensor",
                  "RuntimeError 'view size is not compatible with input tensor's size and stride'"),
    "TL005": Code("model split across devices",
                  "a device-mismatch error while the model's parameters sit on more than one device"),
    "TL006": Code("activation with its graph cached on a module",
                  "a tensor with grad_fn assigned to a module attribute during forward and still "
                  "held after the optimizer step; 'Trying to backward through the graph a second "
                  "time' when such a tensor is reused"),
    "TL007": Code("batch not on the model's device",
                  "a device-mismatch error while the model's parameters all sit on one device and "
                  "an operand (the batch, the target) on another"),
    "TL008": Code("hard-coded CUDA on a machine without it",
                  "AssertionError 'Torch not compiled with CUDA enabled', 'Found no NVIDIA driver', "
                  "'No CUDA GPUs are available', 'torch.cuda.FloatTensor not available'"),
    "TL009": Code("half-precision input to a float32 model",
                  "a dtype-mismatch error ('mat1 and mat2 must have the same dtype, but got Half and "
                  "Float', 'Input type (...Half...) and weight type (...float...)') with a float16 "
                  "or bfloat16 operand"),
    "TL101": Code("submodules in a plain list/dict are not registered",
                  "a module whose forward ran while it sits in a plain list/tuple/dict attribute, "
                  "so model.parameters() does not return its parameters"),
    "TL102": Code("plain tensor attribute left on the old device",
                  "a device-mismatch error whose operand is a module's plain tensor attribute "
                  "(neither parameter nor buffer) on another device than the parameters"),
    "TL104": Code("backward() on a result computed without grad",
                  "RuntimeError 'element 0 of tensors does not require grad' on a tensor computed "
                  "under no_grad/inference_mode"),
    "TL105": Code(".grad of a non-leaf tensor",
                  "UserWarning 'The .grad attribute of a Tensor that is not a leaf Tensor is being "
                  "accessed'"),
    "TL106": Code("evaluation with autograd on",
                  "a model in eval() run with grad enabled whose graph no backward ever uses"),
    "TL107": Code("evaluation in training mode",
                  "a model with Dropout/BatchNorm in training mode called under no_grad or "
                  "inference_mode"),
    "TL108": Code("softmax output fed to CrossEntropyLoss/NLLLoss",
                  "the loss input's grad_fn is SoftmaxBackward0 (through views)"),
    "TL109": Code("sigmoid output fed to BCELoss",
                  "the loss input's grad_fn is SigmoidBackward0 (through views)"),
    "TL110": Code("out-of-place tensor op as a statement: its result is lost",
                  "a tensor method or torch.nn.functional op called directly from the user's code whose "
                  "new tensor Python discards (the next instruction is POP_TOP)"),
    "TL112": Code("layer with parameters built inside forward",
                  "a module registering parameters while a forward runs, a new one at the same line "
                  "in two separate calls"),
    "TL301": Code("a layer given an input that does not fit its definition",
                  "RuntimeError 'mat1 and mat2 shapes cannot be multiplied' or 'Given groups=..., weight of size "
                  "... expected input ... to have N channels' raised inside a Linear or Conv layer (the layer, the "
                  "shape it was given, its weight's shape and the line that built it)"),
    "TL113": Code("BatchNorm given a tensor of the wrong rank",
                  "ValueError 'expected 4D input (got 2D input)' (and the other ranks) raised by a "
                  "BatchNorm module"),
    "TL114": Code("sigmoid output fed to CrossEntropyLoss/NLLLoss",
                  "the loss input's grad_fn is SigmoidBackward0 (through views)"),
    "TL116": Code(".numpy() on a tensor that requires grad",
                  "RuntimeError \"Can't call numpy() on Tensor that requires grad\""),
    "TL117": Code("backward through a module output computed before an optimizer step",
                  "the backward error 'modified by an inplace operation' whose tensor (shape and "
                  "version) is a parameter an optimizer stepped since the forward"),
    "TL201": Code("indexing a 0-dim tensor (loss.data[0])",
                  "IndexError 'invalid index of a 0-dim tensor'"),
    "TL202": Code("Variable(..., volatile=True) has no effect",
                  "UserWarning 'volatile was removed and now has no effect'"),
    "TL203": Code("backward(retain_variables=...) was removed",
                  "TypeError \"unexpected keyword argument 'retain_variables'\""),
    "TL204": Code(".cuda(async=True) is a syntax error",
                  "SyntaxError at a keyword argument named async"),
    "TL205": Code("legacy autograd.Function with a non-static forward",
                  "RuntimeError 'Legacy autograd function with non-static forward method is "
                  "deprecated'"),
    "TL206": Code("size_average=/reduce= on a loss",
                  "UserWarning 'size_average and reduce args will be deprecated'"),
    "TL207": Code("lr_scheduler.step() before optimizer.step()",
                  "UserWarning 'Detected call of `lr_scheduler.step()` before `optimizer.step()`'"),
    "TL208": Code("deprecated initialiser or functional",
                  "FutureWarning 'nn.init.<name> is now deprecated in favor of nn.init.<name>_', "
                  "UserWarning 'nn.functional.upsample... is deprecated'"),
}


# Codes whose detectors watch values only at the lines where they saw the situation: a finding
# whose line ran is RAN WITHOUT HARM only where the run saw it there; else NO EVIDENCE, saying this.
WATCHED_AT_LINES: Dict[str, str] = {
    "TL120": "the run saw no parameter an optimizer holds with `require_grad = False` set (and a "
             "`require_grad = True` leaves a tensor without gradients, which no detector watches)",
    "TL123": "the run saw no dropout there run inside a model in eval() (the harm shows only in an evaluation)",
    "TL124": "the run saw no tensor with an autograd graph copied into a new tensor there",
    "TL127": "the run saw no in-place shape change of a `.data`/`.detach()` alias there",
    "TL129": "the run saw no tensor compared with 0.5 (or rounded) there",
    "TL132": "the run saw no random transform of a class built there run on the data of an evaluation (with "
             "autograd off or the model in eval(); torchvision before 0.8 wrote transforms no hook sees)",
    "TL131": "the run saw no loss computed there (the output of a *Loss module or an F.* loss), so it cannot "
             "tell whether a backward reached it",
}


def unobservable(code: str) -> Optional[str]:
    """Why a run cannot tell whether a finding of `code` whose line ran did harm; None when a
    detector observes that code."""
    if code in CODES:
        return None
    return f"its line ran, but torchlint run has no detector for {code}: whether it did harm is not observable in a run"


def title(code: str) -> str:
    entry = CODES.get(code)
    return entry.title if entry is not None else code


# -- exceptions ---------------------------------------------------------------------------------
# (code, exception type names, message pattern). The first match wins; the device and dtype
# families are decided by the failure classifier from the operands, not from the text alone.

VIEW_ERROR = "view"
DEVICE_ERROR = "device"
DTYPE_ERROR = "dtype"
NO_CUDA = "no-cuda"
SAVED_MODIFIED = "saved-modified"
LEAF_INPLACE = "leaf-inplace"
NO_GRAD_BACKWARD = "no-grad-backward"
BACKWARD_TWICE = "backward-twice"

_EXCEPTION_FAMILIES: Tuple[Tuple[str, Tuple[str, ...], Pattern[str]], ...] = (
    (VIEW_ERROR, ("RuntimeError",), re.compile(r"view size is not compatible with input tensor's size and stride")),
    (NO_CUDA, ("AssertionError", "RuntimeError", "TypeError"), re.compile(
        r"Torch not compiled with CUDA enabled|Found no NVIDIA driver|No CUDA GPUs are available"
        r"|CUDA driver initialization failed|torch\.cuda\.\w+Tensor not available")),
    (DEVICE_ERROR, ("RuntimeError",), re.compile(
        r"Expected all tensors to be on the same device|is not on the expected device"
        r"|Input and parameter tensors are not at the same device"
        r"|Expected (?:object of )?(?:device|backend) \w+ but got"
        r"|Expected tensor for argument #\d+ '\w+' to have the same device")),
    (DTYPE_ERROR, ("RuntimeError",), re.compile(
        r"must have the same dtype|expected scalar type \w+ but found \w+"
        r"|expected m1 and m2 to have the same dtype")),
    (SAVED_MODIFIED, ("RuntimeError",), re.compile(
        r"one of the variables needed for gradient computation has been modified by an inplace operation")),
    (LEAF_INPLACE, ("RuntimeError",), re.compile(
        r"a (?:view of a )?leaf Variable that requires grad is being used in an in-place operation")),
    (NO_GRAD_BACKWARD, ("RuntimeError",), re.compile(
        r"element \d+ of tensors does not require grad and does not have a grad_fn")),
    (BACKWARD_TWICE, ("RuntimeError",), re.compile(r"Trying to backward through the graph a second time")),
    ("TL113", ("ValueError",), re.compile(r"^expected \d+D(?: or \d+D)? input \(got \d+D input\)")),
    # Shape errors (TL301-TL307): the shape trace of the forward that raised is their evidence.
    ("TL301", ("RuntimeError",), re.compile(
        r"mat1 and mat2 shapes cannot be multiplied|expected input\[.*\] to have \d+ channels"
        r"|running_mean should contain \d+ elements|Given normalized_shape=|input\.size\(-1\) must be equal to "
        r"input_size|expected input's size at dim=1 to match num_features")),
    ("TL301", ("ValueError",), re.compile(r"expected input's size at dim=1 to match num_features")),
    ("TL302", ("RuntimeError",), re.compile(r"shape '\[[^\]]*\]' is invalid for input of size")),
    ("TL302", ("ValueError",), re.compile(r"Expected input batch_size \(\d+\) to match target batch_size")),
    ("TL303", ("RuntimeError",), re.compile(
        r"Kernel size can't be greater than actual input size|Output size is too small")),
    ("TL304", ("RuntimeError",), re.compile(
        r"Sizes of tensors must match except in dimension|The size of tensor a \(\d+\) must match the size of "
        r"tensor b")),
    ("TL305", ("RuntimeError",), re.compile(r"0D or 1D target tensor expected, multi-target not supported")),
    ("TL305", ("ValueError",), re.compile(
        r"Using a target size \(.*\) that is different to the input size|Target size \(.*\) must be the same as "
        r"input size")),
    ("TL307", ("RuntimeError",), re.compile(r"output with shape \[1, \d+, \d+\] doesn't match the broadcast shape")),
    ("TL116", ("RuntimeError",), re.compile(r"Can't call numpy\(\) on Tensor that requires grad")),
    ("TL201", ("IndexError",), re.compile(r"invalid index of a 0-dim tensor")),
    ("TL203", ("TypeError",), re.compile(r"unexpected keyword argument 'retain_variables'")),
    ("TL205", ("RuntimeError",), re.compile(r"Legacy autograd function with non-static forward method")),
)

# The exception type's name is matched, not the class: TypeError and IndexError are builtins, and
# torch raises plain RuntimeError/AssertionError for everything else here.


# "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the
# same": a device error when one side is CUDA and the other is not, else a dtype error.
_INPUT_WEIGHT_TYPE = re.compile(r"Input type \(([\w:.]+)\) and (?:weight|bias) type \(([\w:.]+)\) should be the same")


def exception_family(type_name: str, message: str) -> Optional[str]:
    """The family (or directly the code) an exception belongs to, from its type and message."""
    match = _INPUT_WEIGHT_TYPE.search(message) if type_name == "RuntimeError" else None
    if match is not None:
        left, right = match.groups()
        return DEVICE_ERROR if ("cuda" in left) != ("cuda" in right) else DTYPE_ERROR
    for family, types, pattern in _EXCEPTION_FAMILIES:
        if type_name in types and pattern.search(message):
            return family
    return None


ASYNC_KEYWORD = re.compile(r"[(,]\s*async\s*=")


def is_async_keyword_syntax_error(text: Optional[str]) -> bool:
    """Whether a SyntaxError's source line is a call with a keyword argument named `async`
    (`.cuda(async=True)`: valid before Python 3.7, where async became a keyword)."""
    return bool(text) and ASYNC_KEYWORD.search(text) is not None


# -- warnings -----------------------------------------------------------------------------------

_WARNINGS: Tuple[Tuple[str, Tuple[str, ...], Pattern[str]], ...] = (
    ("TL105", ("UserWarning",),
     re.compile(r"The \.grad attribute of a Tensor that is not a leaf Tensor is being accessed")),
    ("TL202", ("UserWarning",), re.compile(r"volatile was removed and now has no effect")),
    ("TL305", ("UserWarning",), re.compile(r"Using a target size \(.*\) that is different to the input size")),
    ("TL206", ("UserWarning",), re.compile(r"size_average and reduce args will be deprecated")),
    ("TL207", ("UserWarning",), re.compile(r"Detected call of `lr_scheduler\.step\(\)` before `optimizer\.step\(\)`")),
    ("TL208", ("FutureWarning", "UserWarning", "DeprecationWarning"), re.compile(
        r"nn\.init\.\w+` is now deprecated in favor of `nn\.init\.\w+_`|nn\.init\.\w+ is now deprecated"
        r"|nn\.functional\.upsample(?:_bilinear|_nearest)?` is deprecated")),
)


def warning_code(category_name: str, message: str) -> Optional[str]:
    for code, categories, pattern in _WARNINGS:
        if category_name in categories and pattern.search(message):
            return code
    return None


# -- torch.load's weights_only default and 0-dim numpy reads (TL211, TL212) --------------------
# `UnpicklingError` is `_pickle.UnpicklingError` (matched by its name, as above); the innermost
# frame in the user's files is the `torch.load(...)` / `.numpy()[0]` line.
CODES.update({
    "TL211": Code("torch.load of a checkpoint weights_only=True cannot read",
                  "UnpicklingError 'Weights only load failed' (torch.load's weights_only default "
                  "is True since PyTorch 2.6)"),
    "TL212": Code("a 0-dim tensor read as a sequence (loss.data.numpy()[0], sum(loss))",
                  "IndexError 'too many indices for array: array is 0-dimensional'; TypeError "
                  "'iteration over a 0-d tensor'"),
})
# What the run says at the user's line for a code recognised by its exception alone.
RUN_ADVICE: Dict[str, str] = {
    "TL116": "`.numpy()` on a tensor that requires grad; call `.detach()` first (`x.detach().cpu().numpy()`)",
    "TL211": "torch.load's weights_only defaults to True since PyTorch 2.6 and the checkpoint holds something "
             "it refuses; save `vars(args)`/`state_dict()`, or pass `weights_only=False` for a file you trust",
    "TL212": "a loss or a full reduction is 0-dim since PyTorch 0.4: `.numpy()[0]` and `sum(loss)` fail; use "
             "`loss.item()`",
}
_EXCEPTION_FAMILIES = _EXCEPTION_FAMILIES + (
    ("TL211", ("UnpicklingError",), re.compile(r"Weights only load failed")),
    ("TL212", ("IndexError",), re.compile(r"too many indices for array: array is 0-dimensional")),
    ("TL212", ("TypeError",), re.compile(r"iteration over a 0-d tensor")),
)


# -- a 0-dim tensor as a dict key (TL126) ------------------------------------------------------------
# A tensor hashes by identity, so `d[t]` of a dict with int keys raises KeyError whose message is the
# tensor's repr (`KeyError: tensor(1)`); the innermost user frame is the lookup.
CODES["TL130"] = Code("NumPy or matplotlib over a list of tensors that require grad",
                      "RuntimeError 'Can't call numpy() on Tensor that requires grad' raised by a NumPy or "
                      "matplotlib call on the user's line (not by `.numpy()` itself, which is TL116)")
CODES["TL126"] = Code("a 0-dim tensor used as a dict key",
                      "KeyError whose key is a tensor ('tensor(1)'): tensors hash by identity")
RUN_ADVICE["TL126"] = "a tensor used as a dict key hashes by identity and is never found; use `key.item()`"
_EXCEPTION_FAMILIES = _EXCEPTION_FAMILIES + (("TL126", ("KeyError",), re.compile(r"^'?tensor\(")),)

# -- seen through the step hooks and the TorchFunctionMode (TL123, TL125, TL133-TL135: detectors/wiring.py)
CODES["TL125"] = Code("an optimizer with state built anew for every step",
                      "a new optimizer instance stepping the same parameters at each step, each starting "
                      "with an empty state while the previous one had kept state after its single step")
CODES["TL134"] = Code("eval() left on in the training loop",
                      "an optimizer step after forwards (autograd on) of a module with Dropout/BatchNorm, all "
                      "in eval mode, when that module stepped in training mode before")
CODES["TL123"] = Code("dropout that model.eval() cannot turn off",
                      "F.dropout called with training=True (passed or by default), or a Dropout module in "
                      "training mode that is no submodule of the root (built in forward), inside a forward of "
                      "a root module in eval mode")
# -- losses no backward reached, aliases, thresholds (detectors/unreached.py, aliases.py, thresholds.py)
CODES["TL124"] = Code("a loss copied into a new tensor before the backward",
                      "a tensor with a graph copied at the line (`torch.Tensor([loss])` probes `__index__`, "
                      "`torch.tensor(loss)`) whose graph was freed without any backward reaching it while "
                      "backward and the optimizer went on (evidence for a static finding only)")
CODES["TL131"] = Code("a loss overwritten before its backward",
                      "losses computed at the line whose graphs were freed without any backward reaching them "
                      "while backward and the optimizer went on (evidence for a static finding only)")
CODES["TL127"] = Code("an in-place shape change of a temporary alias",
                      "`t_`/`transpose_`/`squeeze_`/`unsqueeze_`/`resize_` called on the result of `.data` or "
                      "`.detach()` and discarded by the statement, having changed the alias's shape or strides")
CODES["TL129"] = Code("logits thresholded at 0.5",
                      "a comparison with 0.5 (or `round`) of values outside [0, 1] that decides some elements "
                      "differently than the comparison with 0 (evidence for a static finding only)")
CODES["TL120"] = Code("`require_grad = False`: a typo that freezes nothing",
                      "at an optimizer's first step, parameters it holds with a Python attribute `require_grad` "
                      "False (on them or their module) that still require grad and got a gradient")
CODES["TL132"] = Code("random augmentation in the data of an evaluation",
                      "a random torchvision transform (a module since torchvision 0.8) run while loading data "
                      "with autograd off or the model in eval(), whose second application to the same input "
                      "(random state saved and restored) differs (evidence for a static finding only)")
CODES["TL135"] = Code("an optimizer step with no backward since zero_grad()",
                      "an optimizer step none of whose trainable parameters got a gradient since the previous "
                      "step: every .grad None or all zero")
CODES["TL133"] = Code("a layer with weights that forward never uses",
                      "a submodule with trainable parameters held by the optimizer, never called in the first "
                      "3 steps, whose .grad stayed None")

# -- layers kept in a plain list and called as one (TL101) ------------------------------------------
# `self.layers = [nn.Linear(...), ...]` then `self.layers(x)` in forward: TypeError "'list' object is
# not callable"; the run names the container attribute and the `__init__` line that built it.
_EXCEPTION_FAMILIES = _EXCEPTION_FAMILIES + (
    ("TL101", ("TypeError",), re.compile(r"^'(?:list|tuple|dict)' object is not callable")),)

# -- a called module without forward (TL128) ---------------------------------------------------------
# nn.Module's own `forward` is `_forward_unimplemented`, which raises NotImplementedError 'Module [Net]
# is missing the required "forward" function'; the static finding sits on the class (or the `forward`
# nested in one of its methods), so the run names the class's lines too.
CODES["TL128"] = Code("a called nn.Module subclass without forward",
                      "NotImplementedError 'Module [Net] is missing the required \"forward\" function'")
_EXCEPTION_FAMILIES = _EXCEPTION_FAMILIES + (
    ("TL128", ("NotImplementedError",), re.compile(r'is missing the required "forward" function')),)

# -- API drift (TL209, TL210): from the API-change table, not spelled out here -------------------
# An exception a removed API of `torchlint.analysis.api_changes.removed` raises (its measured
# `error` text: RuntimeError "deprecated since version 1.9 and is now removed", ModuleNotFoundError
# "No module named 'torch._six'", AttributeError "... has no attribute 'next'") is TL209 at the
# user's line. A warning a deprecated API of the same table emits (its measured `error` text, e.g.
# UserWarning "torch.range is deprecated and will be removed ...") is TL210: see `deprecated_api`.

API_REMOVED = "TL209"
_LOADER_ITERATOR = re.compile(r"'_\w*DataLoaderIter' object has no attribute 'next'")


def _api_drift_patterns() -> Tuple[Tuple[object, str, Pattern[str]], ...]:
    from torchlint.analysis.api_changes import METHOD, RAISES, removed

    found = []
    for change in removed.CHANGES:
        kind, text = change.error_type, change.error_text
        if change.outcome != RAISES or not text:
            continue
        if change.kind == METHOD and change.api.endswith("__iter__().next"):
            pattern = _LOADER_ITERATOR  # the iterator class depends on num_workers
        else:
            pattern = re.compile(re.escape(text.split(". ")[0]))
        found.append((change, kind, pattern))
    return tuple(found)


_API_DRIFT = _api_drift_patterns()

CODES["TL209"] = Code("a removed torch API (API-change table)",
                      "an exception whose type and text are a removed entry's measured error "
                      "(RuntimeError 'deprecated since version 1.9 and is now removed', "
                      "ModuleNotFoundError \"No module named 'torch._six'\", AttributeError "
                      "\"'_SingleProcessDataLoaderIter' object has no attribute 'next'\", ...)")


def removed_api(type_name: str, message: str):
    """The API-change entry (RAISES) whose measured error this exception is, or None."""
    for change, kind, pattern in _API_DRIFT:
        if kind == type_name and pattern.search(message):
            return change
    return None


_EXCEPTION_FAMILIES = _EXCEPTION_FAMILIES + tuple(
    (API_REMOVED, (kind,), pattern) for change, kind, pattern in _API_DRIFT)


# -- TL213 (checkpoint without use_reentrant) -------------------------------------------------------------
# A separate block: torch 2.13's torch/utils/checkpoint.py warns on every call without `use_reentrant`
# (stacklevel=2, so the warning names the caller's line). TL215's torchvision warnings are left out: torchvision
# cannot run beside this torch, so no run could confirm them here.
CODES["TL213"] = Code("checkpoint without use_reentrant",
                      "UserWarning 'the use_reentrant parameter should be passed explicitly' "
                      "(torch.utils.checkpoint.checkpoint / checkpoint_sequential)")
_WARNINGS = _WARNINGS + (
    ("TL213", ("UserWarning",), re.compile(r"the use_reentrant parameter should be passed explicitly")),
)
# The one-line message `torchlint run` shows for a code recognised by its warning.
WARNING_MESSAGES: Dict[str, str] = {
    "TL105": "`.grad` of a non-leaf tensor is always None; read the leaf's `.grad`, or call `retain_grad()` "
             "before backward",
    "TL202": "`volatile=True` has no effect since PyTorch 0.4, so this builds autograd graphs; drop it and "
             "wrap the evaluation in `torch.no_grad()`",
    "TL206": "`size_average`/`reduce` are deprecated; use the equivalent `reduction=` argument",
    "TL207": "`scheduler.step()` runs before `optimizer.step()`, so the first value of the schedule is "
             "skipped; call it after the epoch's optimizer steps",
    "TL208": "a deprecated initialiser or functional; use the underscore initialiser (`xavier_uniform_`) or "
             "`F.interpolate`",
    "TL213": "`checkpoint` without `use_reentrant=` runs the reentrant variant, whose blocks get no gradient "
             "when no input requires grad; pass `use_reentrant=False`",
    "TL305": "the loss's input and target shapes differ, so they broadcast: every prediction is compared with "
             "every target; give both the same shape (`output.squeeze(1)`)",
}


# -- TL210 (deprecated torch API): the warnings of the API-change table's WARNS entries -------------------
# Each WARNS entry of `removed.CHANGES` carries the warning torch 2.13 emits (measured: every entry's
# check snippet warns with exactly that text, whitespace aside). The whole text is matched, not its
# first sentence: functorch's eight warnings share theirs ("We've integrated functorch into PyTorch.").
# These come after `_WARNINGS` (TL208's nn.init/upsample texts and TL213's checkpoint are not in
# `removed.CHANGES`), so a code of its own always wins.
API_DEPRECATED = "TL210"


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _api_warning_texts() -> Tuple[Tuple[object, str, str], ...]:
    from torchlint.analysis.api_changes import WARNS, removed

    return tuple((change, change.error_type, _normalised(change.error_text)) for change in removed.CHANGES
                 if change.outcome == WARNS and change.error_type and change.error_text)


_API_WARNINGS = _api_warning_texts()

CODES["TL210"] = Code("a deprecated torch API (API-change table)",
                      "a warning whose category and text are a deprecated entry's measured warning "
                      "(UserWarning 'torch.range is deprecated and will be removed', FutureWarning "
                      "'`torch.cuda.amp.autocast(args...)` is deprecated', ...)")


def deprecated_api(category_name: str, message: str):
    """The API-change entry (WARNS) whose measured warning this is, or None."""
    if "deprecated" not in message:
        return None
    text = _normalised(message)
    for change, category, expected in _API_WARNINGS:
        if category == category_name and expected in text:
            return change
    return None


def run_warning(category_name: str, message: str) -> Optional[Tuple[str, str]]:
    """(code, the one-line message `torchlint run` shows) for a warning it maps, or None."""
    code = warning_code(category_name, message)
    if code is not None:
        return code, WARNING_MESSAGES[code]
    change = deprecated_api(category_name, message)
    if change is None:
        return None
    since = f" since {change.deprecated_in}" if change.deprecated_in else ""
    return API_DEPRECATED, f"`{change.api}` is deprecated{since} and warns; use {change.replacement}"


# -- TL216 (a call today's torch rejects) ------------------------------------------------------------
# The TypeError Python raises when it binds a call's arguments: `ReduceLROnPlateau.__init__() got an
# unexpected keyword argument 'verbose'`, `Linear.__init__() missing 1 required positional argument:
# 'out_features'`, `ReLU.__init__() takes from 1 to 2 positional arguments but 3 were given`. It is
# TL216 when the callee it names is a callable of the signature table and the exception left the
# user's code at that call (raised by the binding itself, or inside torch: `nn.LSTM` binds in
# `RNNBase.__init__`); see `Failures._rejected_call`.
SIGNATURE_MISMATCH = "TL216"
CALL_REJECTED = re.compile(
    r"^(?P<callee>[\w.]+)\(\) (?:got an unexpected keyword argument '(?P<keyword>\w+)'"
    r"|takes (?:from \d+ to )?\d+ positional arguments? but \d+ (?:were|was) given"
    r"|missing \d+ required (?:positional |keyword-only )?arguments?)")
CODES[SIGNATURE_MISMATCH] = Code("a call of a torch callable that today's torch rejects",
                                 "TypeError of a call's binding ('got an unexpected keyword argument', "
                                 "'takes N positional arguments but M were given', 'missing N required "
                                 "positional argument') naming a callable of the signature table, raised at "
                                 "the user's call or inside torch below it")
_EXCEPTION_FAMILIES = _EXCEPTION_FAMILIES + ((SIGNATURE_MISMATCH, ("TypeError",), CALL_REJECTED),)


def rejected_call(message: str) -> Optional[Tuple[str, str]]:
    """(the callee's own name, the rejected keyword or "") of a binding TypeError, or None:
    `ReduceLROnPlateau.__init__() got ... 'verbose'` -> ("ReduceLROnPlateau", "verbose")."""
    match = CALL_REJECTED.search(message)
    if match is None:
        return None
    callee = match.group("callee")
    parts = callee.split(".")
    short = parts[-2] if len(parts) >= 2 and parts[-1] == "__init__" else parts[-1]
    return short, match.group("keyword") or ""


def rejected_call_advice(short: str, keyword: str) -> Optional[str]:
    """What the run says at the user's line for a binding TypeError of the table's callable
    `short`; None when no table entry has that name."""
    from torchlint.analysis.api_changes import signatures as table

    entries = table.by_short_name(short)
    if not entries:
        return None
    if not keyword:
        return (f"this call of `{short}` does not match its signature on torch {table.torch_version()}: "
                f"{short}{entries[0].text}")
    for entry in entries:
        change = table.keyword_history(entry, None, keyword)
        if change is not None:
            since = f" (deprecated in {change.deprecated_in})" if change.deprecated_in else ""
            return f"`{keyword}=` of `{short}` was removed in PyTorch {change.changed_in}{since}: {change.replacement}"
    close = table.close_spellings(keyword, entries[0])
    if len(close) == 1:
        return f"`{short}` has no parameter `{keyword}`; did you mean `{close[0]}=`?"
    public = [k for k in entries[0].keywords if not k.startswith("_")]
    return f"`{short}` has no parameter `{keyword}`; its parameters are {', '.join(public) or 'positional only'}"
