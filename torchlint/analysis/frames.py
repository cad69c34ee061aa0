"""Calling contexts of the value model and binding a call's arguments to a function's parameters."""

from __future__ import annotations

import weakref
from typing import Dict, List, Optional

import libcst as cst

from torchlint.analysis.value import GRAD_INHERITED, Value


class Frame:
    """A calling context: the function being interpreted, the values of its parameters (None
    for the generic context, where each parameter is what every call passes), and the grad
    mode its caller runs it under."""

    __slots__ = ("function", "args", "_grad", "_resolve", "nesting", "key")

    def __init__(self, function: Optional[cst.CSTNode], args: Optional[Dict[int, Value]], grad: Optional[str],
                 nesting: int = 0, resolve=None) -> None:
        self.function = function
        self.args = args
        self._grad = grad
        # Computes the grad mode of a generic frame on first use. A bound method of the value
        # model that keeps the frame: held weakly, so that the model and the parse tree it
        # reads are freed by reference counting when the file is done (a cycle would keep
        # them until a garbage collection, which the linter runs rarely).
        self._resolve = weakref.WeakMethod(resolve) if resolve is not None else None
        self.nesting = nesting  # how many interpreted calls enclose this one
        self.key = (id(function), grad, None if args is None else tuple(sorted((k, v.key()) for k, v in args.items())))

    @property
    def grad(self) -> str:
        if self._grad is None:
            self._grad = GRAD_INHERITED  # while resolving: recursion sees the default
            self._grad = self._resolve()(self.function)
        return self._grad


def _positional_params(function: cst.FunctionDef) -> List[cst.Param]:
    params = function.params
    return list(params.posonly_params) + list(params.params)


def _all_params(function: cst.FunctionDef) -> List[cst.Param]:
    params = function.params
    found = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    for star in (params.star_arg, params.star_kwarg):
        if type(star) is cst.Param:
            found.append(star)
    return found


def _bind(function: cst.FunctionDef, call: cst.Call, skip_self: bool) -> Optional[Dict[int, cst.BaseExpression]]:
    """{param id: argument expression} for `call` of `function`; None when the call unpacks
    arguments (`*args`, `**kwargs`) in a way that hides which parameter gets what."""
    positional = _positional_params(function)
    if skip_self:
        positional = positional[1:]
    keyword_params = {p.name.value: p for p in positional + list(function.params.kwonly_params)}
    binding: Dict[int, cst.BaseExpression] = {}
    position = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None:
            param = keyword_params.get(arg.keyword.value)
            if param is not None:
                binding[id(param)] = arg.value
            continue
        if position < len(positional):
            binding[id(positional[position])] = arg.value
            position += 1
    return binding
