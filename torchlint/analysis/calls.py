"""The shape of a call, judged from the syntax alone: `<x>.name(...)`, a keyword argument, a
literal `True`. Shared by the semantic model, the value model and the rules (no other import)."""

from __future__ import annotations

from typing import Optional

import libcst as cst


def is_true(node: Optional[cst.BaseExpression]) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def keyword(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def method_call(node: cst.CSTNode, *names: str) -> bool:
    """`<x>.name(...)` for one of `names`."""
    # Exact type checks: isinstance on LibCST classes goes through ABCMeta, and this runs on
    # every call of every file.
    return (
        type(node) is cst.Call
        and type(node.func) is cst.Attribute
        and (not names or node.func.attr.value in names)
    )


def method_call_in(node: cst.CSTNode, names) -> bool:
    """`<x>.name(...)` for a name in the collection `names` (a set: no tuple is built per call,
    as `method_call(node, *names)` would)."""
    return type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in names
