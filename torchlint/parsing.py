"""LibCST's parse without LibCST's re-validation of what its own parser built.

Every LibCST node runs `_validate()` when it is constructed (`CSTNode.__post_init__`), so that
trees built by hand cannot hold, say, a `Name` with a space in it. The native parser builds each
node from the tokens it has just accepted, so on its output that check re-proves what the
grammar already guaranteed; it costs about a tenth of the parse (LibCST's own comment on
`__post_init__` says as much). `parse_module` here switches it off for the duration of the parse
and nothing else: nodes that rules or fixes build keep validating.

It is used only where that is known to be safe: LibCST's node classes must not define a
`__post_init__` of their own (checked once per process; true of every LibCST 1.x). Otherwise the
stock `libcst.parse_module` is used. Swapping a class attribute is not thread-safe; torchlint
parses in one thread per process (its workers are processes).
"""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst
from libcst._nodes.base import CSTNode

_HOOK = CSTNode.__dict__.get("__post_init__")
_SAFE: Optional[bool] = None


def _no_validation(self) -> None:  # a node the parser built is valid by construction
    return None


def _subclasses(root: type):
    stack = [root]
    while stack:
        current = stack.pop()
        for sub in current.__subclasses__():
            yield sub
            stack.append(sub)


def _hook_is_only_on_the_base() -> bool:
    global _SAFE
    if _SAFE is None:
        _SAFE = _HOOK is not None and not any("__post_init__" in sub.__dict__ for sub in _subclasses(CSTNode))
    return _SAFE


def parse_module(source: Union[str, bytes]) -> cst.Module:
    """`libcst.parse_module(source)`, the same tree, without the per-node re-validation."""
    if not _hook_is_only_on_the_base() or CSTNode.__dict__.get("__post_init__") is not _HOOK:
        return cst.parse_module(source)  # unknown layout, or already inside a parse
    CSTNode.__post_init__ = _no_validation
    try:
        return cst.parse_module(source)
    finally:
        CSTNode.__post_init__ = _HOOK
