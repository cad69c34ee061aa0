"""Which torch operations return a new tensor and leave their input alone (TL110's data; also
read by `torchlint run`'s detector of a discarded result). Names from torch 2.13; nothing here
imports torch or LibCST."""

from __future__ import annotations

from torchlint.analysis import torch_api as api

# -- out-of-place operations (TL110) ------------------------------------------------------------
# Tensor methods that return a new tensor (or a view) and never write the receiver: as a
# statement they do nothing. Device and dtype moves first (`x.to(device)`, `x.cuda()`,
# `x.float()`): an nn.Module's methods of the same names move the module in place, which is why
# the receiver must certainly be a tensor.
DEVICE_AND_DTYPE_MOVES = frozenset({"to", "cuda", "cpu", "type"}) | api.DTYPE_CASTS
OUT_OF_PLACE_METHODS = (
    DEVICE_AND_DTYPE_MOVES | api.ELEMENTWISE | api.TRANSPOSING | api.RESHAPING
    | (api.OTHER_VIEWS - {"as_strided"}) | frozenset("""
view view_as clone detach repeat repeat_interleave masked_fill softmax log_softmax index_select
gather scatter index_fill index_add flip roll tril triu cumsum cumprod
""".split())
)
# torch.<name> functions that return a new tensor (unless `out=` is given).
OUT_OF_PLACE_TORCH = api.ELEMENTWISE | api.TRANSPOSING | api.RESHAPING | frozenset(
    "clone detach softmax log_softmax flatten squeeze unsqueeze cat stack".split())
# torch.nn.functional.<name> functions that return a new tensor (unless `inplace=True`).
OUT_OF_PLACE_FUNCTIONAL = api.FUNCTIONAL_ELEMENTWISE | frozenset(
    "softmax log_softmax normalize layer_norm pad interpolate".split())
