"""The facts rules ask for, computed lazily from one index of the module and cached.

Every fact answers conservatively: when the code does not make it clear that a name is a tensor
requiring grad, an optimizer or a module, the answer is "no", so that rules stay silent.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Dict, Iterator, List, Optional, Set

import libcst as cst

from libcst._nodes.internal import CodegenState

from torchlint.analysis import dataflow
from torchlint.analysis.index import Index
from torchlint.analysis.scopes import Scopes, dotted_name

GRAD_DISABLING = {
    "torch.no_grad",
    "torch.inference_mode",
    "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
}
GRAD_ENABLING = {"torch.enable_grad", "torch.autograd.enable_grad"}
SET_GRAD_ENABLED = {"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"}

# Classes in torch.nn that are not modules.
_NN_NON_MODULES = {"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"}
_MODULE_BASES = (
    "torch.nn.Module",
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
    "lightning.pytorch.core.LightningModule",
    "pytorch_lightning.LightningModule",
    "pytorch_lightning.core.LightningModule",
)
# Methods of nn.Module that return the module itself.
MODULE_SELF_METHODS = {"to", "cuda", "cpu", "eval", "train", "half", "float", "double", "bfloat16",
                       "requires_grad_", "to_empty", "xpu", "mps", "type", "share_memory"}
TENSOR_FACTORIES = {
    "tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange", "linspace",
    "logspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
    "randn_like", "randint_like", "as_tensor", "randperm", "normal",
}
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_COMPREHENSION_TYPES = frozenset(_COMPREHENSIONS)
_LOOP_BARRIERS = frozenset({cst.FunctionDef, cst.Lambda, cst.ClassDef})
OPTIMIZER_PARAM_NAMES = {"optimizer", "opt", "optim", "optimiser"}


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


class Semantic:
    """The semantic model of one module: names, scopes, modules, optimizers, grad mode, loops."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.index = Index(module)
        self.scopes = Scopes(self.index)
        self._module_classes: Optional[Set[cst.ClassDef]] = None
        self._functions_by_name: Optional[Dict[str, List[cst.FunctionDef]]] = None
        self._calls_under: Dict[cst.CSTNode, List[cst.Call]] = {}

    # -- names ------------------------------------------------------------------------------
    def qualified_name(self, node: cst.CSTNode) -> Optional[str]:
        return self.scopes.qualified_name(node)

    def is_torch(self, node: cst.CSTNode, *patterns: str) -> bool:
        """Whether `node` (a name, attribute or call) refers to one of the torch `patterns`
        (shell-style: `torch.optim.*`)."""
        if isinstance(node, cst.Call):
            node = node.func
        name = self.qualified_name(node)
        return name is not None and any(fnmatchcase(name, p) for p in patterns)

    def call_name(self, call: cst.Call) -> Optional[str]:
        return self.qualified_name(call.func)

    # -- structure --------------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.index.parent.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return self.index.ancestors(node)

    def source(self, node: cst.CSTNode) -> str:
        """`node`'s text as it stands in the file. LibCST's `code_for_node` renders a node at
        column 0, so the lines of a multi-line expression inside a block lose the block's
        indentation; rendering with the enclosing blocks' indentation gives them back."""
        module = self.module
        state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
        state.indent_tokens = [
            module.default_indent if block.indent is None else block.indent
            for block in reversed(list(self.ancestors(node))) if type(block) is cst.IndentedBlock
        ]
        node._codegen(state)
        return "".join(state.tokens)

    def statement_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return dataflow.statement_of(self.index, node)

    def function_of(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        return self.scopes.function_of(node)

    def class_of_method(self, function: Optional[cst.FunctionDef]) -> Optional[cst.ClassDef]:
        """The class whose body defines `function` directly."""
        if function is None:
            return None
        scope = self.scopes.scope_of(function)
        return scope if isinstance(scope, cst.ClassDef) else None

    def is_expression_statement(self, node: cst.CSTNode) -> bool:
        """Whether `node` is a whole statement on its own (its value is discarded)."""
        parent = self.parent(node)
        return isinstance(parent, cst.Expr) and parent.value is node

    # -- dataflow ---------------------------------------------------------------------------
    def reaching_definition(self, name: cst.Name) -> Optional[dataflow.Definition]:
        return dataflow.reaching_definition(self.index, name)

    def reaching_value(self, node: cst.BaseExpression, depth: int = 4) -> Optional[cst.BaseExpression]:
        """For a name, the expression certainly assigned to it (followed through plain copies
        `b = a`); for anything else the node itself."""
        seen = 0
        while isinstance(node, cst.Name) and seen < depth:
            definition = self.reaching_definition(node)
            if definition is None or definition.kind != "assign" or definition.value is None:
                return None
            node = definition.value
            seen += 1
        return node

    # -- grad mode --------------------------------------------------------------------------
    def _grad_context(self, expr: cst.BaseExpression) -> Optional[str]:
        if isinstance(expr, cst.Call):
            name = self.qualified_name(expr.func)
            if name in SET_GRAD_ENABLED and expr.args:
                value = expr.args[0].value
                if isinstance(value, cst.Name) and value.value in ("False", "True"):
                    return "enable" if value.value == "True" else "no_grad"
                return "unknown"
        else:
            name = self.qualified_name(expr)
        if name in GRAD_DISABLING:
            return "no_grad"
        if name in GRAD_ENABLING:
            return "enable"
        return None

    def grad_mode(self, node: cst.CSTNode) -> Optional[str]:
        """"no_grad" when `node` runs with autograd off (a `no_grad`/`inference_mode` block or
        decorator, in this function or one enclosing it), "enable" inside `enable_grad`,
        "unknown" for `set_grad_enabled(flag)`, else None."""
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.With) and child is ancestor.body:
                for item in ancestor.items:
                    mode = self._grad_context(item.item)
                    if mode is not None:
                        return mode
            elif isinstance(ancestor, cst.FunctionDef) and child is ancestor.body:
                for decorator in ancestor.decorators:
                    mode = self._grad_context(decorator.decorator)
                    if mode is not None:
                        return mode
            child = ancestor
        return None

    def in_no_grad(self, node: cst.CSTNode) -> bool:
        return self.grad_mode(node) in ("no_grad", "unknown")

    # -- loops ------------------------------------------------------------------------------
    def enclosing_loops(self, node: cst.CSTNode, comprehensions: bool = False) -> List[cst.CSTNode]:
        """For/While loops whose body holds `node`, innermost first, within its function. With
        `comprehensions`, also comprehensions that repeat `node` (it is in their element, not
        their iterable)."""
        loops = []
        child = node
        parent_of = self.index.parent
        ancestor = parent_of.get(node)
        while ancestor is not None:
            kind = type(ancestor)
            if kind in _LOOP_BARRIERS:
                break
            if kind is cst.For or kind is cst.While:
                if child is ancestor.body:
                    loops.append(ancestor)
            elif comprehensions and kind in _COMPREHENSION_TYPES:
                if kind is cst.DictComp:
                    repeated = child is ancestor.value or child is ancestor.key
                else:
                    repeated = child is ancestor.elt
                if repeated:
                    loops.append(ancestor)
            child = ancestor
            ancestor = parent_of.get(ancestor)
        return loops

    def calls_under(self, node: cst.CSTNode, follow_functions: bool = True) -> List[cst.Call]:
        """All calls inside `node`, and (when following) inside the same-file functions and
        methods it calls, transitively."""
        key = node if follow_functions else (node, False)
        cached = self._calls_under.get(key)
        if cached is not None:
            return cached
        calls: List[cst.Call] = []
        visited: Set[cst.CSTNode] = {node}
        pending = [node]
        while pending:
            current = pending.pop()
            for call in self.index.descendants(current, cst.Call):
                calls.append(call)
                if not follow_functions:
                    continue
                for target in self.resolve_local_function(call, current):
                    if target not in visited:
                        visited.add(target)
                        pending.append(target)
        self._calls_under[key] = calls
        return calls

    def resolve_local_function(self, call: cst.Call, context: cst.CSTNode) -> List[cst.FunctionDef]:
        """Same-file functions `call` may invoke: `helper(...)` or `self.helper(...)`."""
        if self._functions_by_name is None:
            table: Dict[str, List[cst.FunctionDef]] = {}
            for function in self.index.nodes(cst.FunctionDef):
                table.setdefault(function.name.value, []).append(function)
            self._functions_by_name = table
        func = call.func
        if isinstance(func, cst.Name):
            return [f for f in self._functions_by_name.get(func.value, []) if self.class_of_method(f) is None]
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            return [f for f in self._functions_by_name.get(func.attr.value, []) if self.class_of_method(f) is not None]
        return []

    # -- autograd calls ---------------------------------------------------------------------
    def is_backward_call(self, call: cst.CSTNode) -> bool:
        if not isinstance(call, cst.Call):
            return False
        if method_call(call, "backward"):
            return True
        return self.is_torch(call, "torch.autograd.backward")

    def is_zero_grad_call(self, call: cst.CSTNode) -> bool:
        return method_call(call, "zero_grad") or (
            isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "zero_grad"
        )

    # -- modules ----------------------------------------------------------------------------
    def _is_module_base(self, base: cst.BaseExpression) -> bool:
        name = self.qualified_name(base)
        if name is None:
            return False
        if name in _MODULE_BASES:
            return True
        parts = name.split(".")
        return (
            len(parts) == 3 and parts[:2] == ["torch", "nn"] and parts[2][:1].isupper()
            and parts[2] not in _NN_NON_MODULES
        )

    def module_classes(self) -> Set[cst.ClassDef]:
        """Classes that subclass `torch.nn.Module`, directly, through an alias, or through
        another class of this file."""
        if self._module_classes is None:
            found: Set[cst.ClassDef] = set()
            classes = self.index.nodes(cst.ClassDef)
            by_name = {c.name.value: c for c in classes}
            changed = True
            while changed:
                changed = False
                for klass in classes:
                    if klass in found:
                        continue
                    for arg in klass.bases:
                        base = arg.value
                        local = by_name.get(base.value) if isinstance(base, cst.Name) else None
                        if (local is not None and local in found) or self._is_module_base(base):
                            found.add(klass)
                            changed = True
                            break
            self._module_classes = found
        return self._module_classes

    def module_class_of(self, node: cst.CSTNode) -> Optional[cst.ClassDef]:
        """The nn.Module subclass whose method contains `node`."""
        function = self.function_of(node)
        while function is not None:
            klass = self.class_of_method(function)
            if klass is not None:
                return klass if klass in self.module_classes() else None
            function = self.function_of(function)
        return None

    def method_of(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        """The method (a def directly in a class body) that contains `node`."""
        function = self.function_of(node)
        while function is not None:
            if self.class_of_method(function) is not None:
                return function
            function = self.function_of(function)
        return None

    def is_module_method(self, node: cst.CSTNode, name: str) -> bool:
        """Whether `node` is inside method `name` (`forward`, `__init__`) of an nn.Module."""
        method = self.method_of(node)
        return (
            method is not None
            and method.name.value == name
            and self.class_of_method(method) in self.module_classes()
        )

    def is_module_construction(self, expr: cst.BaseExpression) -> bool:
        """`nn.Linear(...)`, `Net(...)` for a module class of this file, `torchvision.models.x()`."""
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        if isinstance(func, cst.Name):
            for binding in self.scopes.lookup(func.value, expr) or ():
                if binding.kind == "class" and binding.node in self.module_classes():
                    return True
        name = self.qualified_name(func)
        if name is None:
            return False
        parts = name.split(".")
        if parts[:2] == ["torch", "nn"] and len(parts) == 3:
            return parts[2][:1].isupper() and parts[2] not in _NN_NON_MODULES
        if parts[:2] == ["torchvision", "models"] and parts[-1][:1].islower():
            return True
        return name in ("timm.create_model",)

    def is_module_expr(self, expr: cst.BaseExpression, depth: int = 4) -> bool:
        """Whether `expr` certainly evaluates to an nn.Module."""
        if depth <= 0:
            return False
        if self.is_module_construction(expr):
            return True
        if method_call(expr, *MODULE_SELF_METHODS):
            return self.is_module_expr(expr.func.value, depth - 1)
        return self.bound_value_is(expr, lambda v: self.is_module_expr(v, depth - 1))

    def bound_value_is(self, expr: cst.BaseExpression, predicate) -> bool:
        """Whether what `expr` is bound to satisfies `predicate`: for a name, the value that
        certainly reaches it (else every assignment of it in its scope); for `self.attr`, every
        value assigned to it in the class. False for anything else."""
        if isinstance(expr, cst.Name):
            value = self.reaching_value(expr)
            if value is not None and value is not expr:
                return predicate(value)
            return self._binding_value_everywhere(expr, predicate)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            return self.self_attribute_is(expr, predicate)
        return False

    def _binding_value_everywhere(self, name: cst.Name, predicate) -> bool:
        """All bindings of `name` in its scope are assignments whose values satisfy `predicate`."""
        bindings = self.scopes.lookup(name.value, name)
        if not bindings:
            return False
        if not all(b.kind == "assign" and b.value is not None for b in bindings):
            return False
        return all(predicate(b.value) for b in bindings)

    def self_attribute_assignments(self, attribute: cst.Attribute) -> List[cst.BaseExpression]:
        """Values assigned to `self.<attr>` anywhere in the class that holds `attribute`."""
        method = self.method_of(attribute)
        klass = self.class_of_method(method) if method is not None else None
        if klass is None:
            return []
        values = []
        for assign in self.index.descendants(klass, cst.Assign):
            for target in assign.targets:
                t = target.target
                if (
                    isinstance(t, cst.Attribute)
                    and isinstance(t.value, cst.Name)
                    and t.value.value == "self"
                    and t.attr.value == attribute.attr.value
                ):
                    values.append(assign.value)
        return values

    def self_attribute_is(self, attribute: cst.Attribute, predicate) -> bool:
        values = self.self_attribute_assignments(attribute)
        return bool(values) and all(predicate(v) for v in values)

    # -- optimizers -------------------------------------------------------------------------
    def is_optimizer_construction(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        name = self.qualified_name(expr.func)
        if name is None:
            return False
        parts = name.split(".")
        return parts[:2] == ["torch", "optim"] and len(parts) == 3 and parts[2][:1].isupper()

    def is_optimizer_expr(self, expr: cst.BaseExpression) -> bool:
        """`torch.optim.X(...)`, a name or `self.attr` bound to one, or a parameter named like an
        optimizer (`optimizer`, `opt`, `optim`)."""
        if self.is_optimizer_construction(expr):
            return True
        if isinstance(expr, cst.Name):
            definition = self.reaching_definition(expr)
            if definition is not None:
                if definition.kind == "param":
                    return expr.value in OPTIMIZER_PARAM_NAMES
                if definition.kind == "assign" and definition.value is not None:
                    return self.is_optimizer_construction(definition.value)
            return self._binding_value_everywhere(expr, self.is_optimizer_construction)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            return self.self_attribute_is(expr, self.is_optimizer_construction)
        return False

    # -- tensors requiring grad -------------------------------------------------------------
    def is_leaf_requiring_grad_construction(self, expr: cst.BaseExpression) -> bool:
        """`torch.zeros(..., requires_grad=True)`, `nn.Parameter(...)`, `t.requires_grad_()` on
        a factory result."""
        if not isinstance(expr, cst.Call):
            return False
        if self.is_torch(expr, "torch.nn.Parameter", "torch.nn.parameter.Parameter"):
            flag = keyword(expr, "requires_grad")
            if flag is None and len(expr.args) > 1 and expr.args[1].keyword is None:
                flag = expr.args[1].value
            return flag is None or is_true(flag)
        name = self.call_name(expr)
        if name is not None and name.startswith("torch.") and name.split(".")[-1] in TENSOR_FACTORIES \
                and name.count(".") == 1:
            return is_true(keyword(expr, "requires_grad"))
        if method_call(expr, "requires_grad_"):
            if expr.args and not is_true(expr.args[0].value):
                return False
            receiver = expr.func.value
            if isinstance(receiver, cst.Call):
                inner = self.call_name(receiver)
                return inner is not None and inner.startswith("torch.") and \
                    inner.split(".")[-1] in TENSOR_FACTORIES
            return False
        return False

    def is_parameters_iteration(self, iterable: cst.BaseExpression) -> Optional[str]:
        """"parameters" / "named_parameters" when `iterable` is `<x>.parameters()` or
        `<x>.named_parameters()` (optionally wrapped in `list(...)`)."""
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and \
                iterable.func.value == "list" and len(iterable.args) == 1:
            iterable = iterable.args[0].value
        if method_call(iterable, "parameters", "named_parameters") and not iterable.args:
            return iterable.func.attr.value
        return None

    def requires_grad_leaf(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is certainly a leaf tensor that requires grad."""
        if self.is_leaf_requiring_grad_construction(expr):
            return True
        if isinstance(expr, cst.Name):
            definition = self.reaching_definition(expr)
            if definition is None:
                return False
            if definition.kind == "assign" and definition.value is not None:
                return self.requires_grad_leaf(definition.value)
            if definition.kind == "for":
                loop = definition.statement
                kind = self.is_parameters_iteration(loop.iter)
                if kind == "parameters":
                    return isinstance(loop.target, cst.Name) and loop.target.value == expr.value
                if kind == "named_parameters":
                    target = loop.target
                    return (
                        isinstance(target, cst.Tuple)
                        and len(target.elements) == 2
                        and isinstance(target.elements[1].value, cst.Name)
                        and target.elements[1].value.value == expr.value
                    )
            return False
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            return self.self_attribute_is(expr, self.is_leaf_requiring_grad_construction)
        return False


def receiver_chain(node: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """`a.b().c` yields `a.b().c`, `a.b()`, `a.b`, `a`: each expression a method chain starts from."""
    current = node
    while True:
        yield current
        if isinstance(current, cst.Call):
            current = current.func
        elif isinstance(current, cst.Attribute):
            current = current.value
        elif isinstance(current, cst.Subscript):
            current = current.value
        else:
            return


__all__ = ["Semantic", "dotted_name", "keyword", "method_call", "is_true", "receiver_chain"]
