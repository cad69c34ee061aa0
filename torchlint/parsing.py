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

The native parser also looks LibCST up once per node it builds: `PyModule::import("libcst")`,
which is CPython's `PyImport_Import`, which calls the `__import__` of the calling Python frame's
builtins and then takes the module from `sys.modules`, ignoring what `__import__` returned. A
full `__import__` for a module loaded long ago was about 5 % of a cold run's instructions on
pytorch/examples. So torchlint calls the native parser from a frame whose builtins hold an
`__import__` that does nothing (`"".format` takes any arguments and returns a string), and the
lookup goes straight to `sys.modules`. Only that frame sees it: no global state changes, other
threads and LibCST's own code import normally. It needs `libcst` in `sys.modules` (it is: this
module imports it) and the layout of LibCST 1.x (`libcst.native`, `convert_to_utf8`); otherwise
the stock entry point is used.
"""

from __future__ import annotations

from typing import Optional, Union

import libcst as cst
from libcst._nodes.base import CSTNode

try:
    from libcst import native as _native
    from libcst._parser.detect_config import convert_to_utf8 as _convert_to_utf8
    from libcst._parser.entrypoints import _DEFAULT_PARTIAL_PARSER_CONFIG as _CONFIG
except ImportError:  # another LibCST layout: the stock entry point
    _native = None


def _native_parse(parse, source, encoding):
    return parse(source, encoding)


# The same function run with builtins whose `__import__` does nothing (see the module docstring).
_native_parse = type(_native_parse)(_native_parse.__code__, {"__builtins__": {"__import__": "".format}},
                                    "_native_parse")


def _stock_parse(source: Union[str, bytes]) -> cst.Module:
    """`libcst.parse_module`, with the per-node `import libcst` made cheap."""
    if _native is None:
        return cst.parse_module(source)
    encoding, text = _convert_to_utf8(source, partial=_CONFIG)
    return _native_parse(_native.parse_module, text, encoding)

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
        return _stock_parse(source)
    finally:
        CSTNode.__post_init__ = _HOOK
