"""The facts rules ask for, computed lazily from one index of the module and cached.

Every fact answers conservatively: when the code does not make it clear that a name is a tensor
requiring grad, an optimizer or a module, the answer is "no", so that rules stay silent.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, Callable, Dict, Iterator, List, Optional, Set

import libcst as cst

from torchlint.positions import PlainCodegenState, block_indents

from torchlint.analysis.calls import is_true, keyword, method_call, method_call_in  # noqa: F401 (re-exported)
from torchlint.analysis.flow import Def
from torchlint.analysis.index import Index
from torchlint.analysis.scopes import Scopes, dotted_name

from torchlint.analysis.torch_api import MODULE_BASES as _MODULE_BASES
from torchlint.analysis.torch_api import MODULE_SELF_METHODS  # noqa: F401 (rules import it from here)
from torchlint.analysis.torch_api import NN_NON_MODULES as _NN_NON_MODULES

_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_COMPREHENSION_TYPES = frozenset(_COMPREHENSIONS)
_LOOP_BARRIERS = frozenset({cst.FunctionDef, cst.Lambda, cst.ClassDef})
_MEMBER_NAMED: Dict[tuple, bool] = {}  # (patterns, member) -> some pattern ends with `.member`


class Semantic:
    """The semantic model of one module: names, scopes, modules, optimizers, grad mode, loops."""

    def __init__(self, module: cst.Module, path: Optional[str] = None, project: Any = None,
                 text: Optional[str] = None) -> None:
        self.module = module
        self.path = path
        # The text the module was parsed from, when known: positions are found in it by
        # generating one statement instead of the whole module (`positions.node_ranges`).
        self.text = text
        # What the file imports from its own project (`torchlint.analysis.project.FileProject`,
        # given by the engine), or None: a file linted without a path sees no other file.
        self.project = project
        self.index = Index(module)
        self.scopes = Scopes(self.index)
        # The hottest questions go straight to the scopes (one Python frame fewer per call: rules
        # and the value model ask them tens of thousands of times per run).
        self.qualified_name = self.scopes.qualified_name
        self.function_of = self.scopes.function_of
        self.parent = self.index.parent.get
        self._module_classes: Optional[Set[cst.ClassDef]] = None
        self._functions_by_name: Optional[Dict[str, List[cst.FunctionDef]]] = None
        self._calls_under: Dict[cst.CSTNode, List[cst.Call]] = {}
        self._loops_above: Dict[tuple, List[cst.CSTNode]] = {}

    @property
    def called_names(self) -> frozenset:
        """The qualified names of everything the file calls (`torch.nn.CrossEntropyLoss`, ...):
        a cheap test before asking the value model whether a call's callee is one of them."""
        found = self.__dict__.get("_called_names")
        if found is None:
            found = set()
            imported = self.scopes.imported_names
            for call in self.index.nodes(cst.Call):
                func = call.func
                root = func
                while type(root) is cst.Attribute:
                    root = root.value
                if type(root) is cst.Name and root.value in imported:
                    name = self.qualified_name(func)
                    if name is not None:
                        found.add(name)
            found = self.__dict__["_called_names"] = frozenset(found)
        return found

    @property
    def imports_torch(self) -> bool:
        """Whether the file imports torch (or a torch framework) anywhere: what name-based guesses
        (a parameter called `model` is a model) need before they apply."""
        found = self.__dict__.get("_imports_torch")
        if found is None:
            roots = ("torch", "torchvision", "lightning", "pytorch_lightning", "timm", "transformers")
            found = any(
                (b.qualified_name or "").split(".")[0] in roots
                for names in self.scopes.bindings.values() for bindings in names.values() for b in bindings
                if b.kind == "import"
            )
            self.__dict__["_imports_torch"] = found
        return found

    @property
    def values(self):
        """The value model of this module (`torchlint.analysis.interpreter.Values`), built on first
        use."""
        found = self.__dict__.get("_values")
        if found is None:
            from torchlint.analysis.interpreter import Values

            found = self.__dict__["_values"] = Values(self)
        return found

    def release(self) -> None:
        """Drop the value model and the other project files' saves, for a file whose analysis is
        done. The model refers back to this object, and two files that load each other's
        checkpoints refer to each other's models; without this they, and the whole parse trees
        they hold, would wait for a garbage collection, which the linter runs rarely (on
        pytorch/examples the trees of 70 files piled up: 25 MB more memory and 6,000 more page
        faults in one run). Asking again rebuilds them, so a late question is slower, never
        wrong."""
        self.__dict__.pop("_values", None)
        self.__dict__.pop("_checkpoint_project_saves", None)

    def elsewhere(self, node: Optional[cst.CSTNode]) -> Optional[str]:
        """Where `node` stands when it belongs to another file of the project ("utils.py:5"):
        a fact the value model took from there (a helper's `.permute()`). None for this file's
        nodes."""
        if node is None or self.project is None or node in self.index.order:
            return None
        return self.project.elsewhere(node)

    # -- names ------------------------------------------------------------------------------
    def qualified_name(self, node: cst.CSTNode) -> Optional[str]:  # replaced per instance (see __init__)
        return self.scopes.qualified_name(node)

    def is_torch(self, node: cst.CSTNode, *patterns: str) -> bool:
        """Whether `node` (a name, attribute or call) refers to one of the torch `patterns`
        (exact names, or shell-style with `*`: `torch.optim.*`)."""
        if type(node) is cst.Call:
            node = node.func
        if type(node) is cst.Attribute:
            # An attribute's last part is the member's own name (only imports alias): a cheap
            # test that settles most calls without resolving the name. Kept per (patterns,
            # member): rules ask the same few pattern lists of every call.
            key = (patterns, node.attr.value)
            named = _MEMBER_NAMED.get(key)
            if named is None:
                if len(_MEMBER_NAMED) > 50_000:  # members are the linted code's spellings: stay bounded
                    _MEMBER_NAMED.clear()
                member = node.attr.value
                named = _MEMBER_NAMED[key] = "*" in "".join(patterns) or any(
                    pattern.endswith(member) and pattern[-len(member) - 1] == "." for pattern in patterns)
            if not named:
                return False
        name = self.qualified_name(node)
        if name is None:
            return False
        for pattern in patterns:
            if pattern == name or ("*" in pattern and fnmatchcase(name, pattern)):
                return True
        return False

    def call_name(self, call: cst.Call) -> Optional[str]:
        return self.qualified_name(call.func)

    # -- structure --------------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:  # replaced per instance (see __init__)
        return self.index.parent.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return self.index.ancestors(node)

    @property
    def code(self) -> str:
        """The module's whole text, for the searches that read it all (the pin lookup, TL132's
        test-time augmentation): the text it was parsed from when known, else LibCST's
        rendering (`module.code`), generated once. The two are the same text: rendering walks
        every node (22 ms for imagenet/main.py) to give back what was parsed, except that a file
        ending in whitespace-only lines without a final newline loses one of those lines (one
        file in 8,536 tried), which no search for code or words can tell apart."""
        found = self.__dict__.get("_code")
        if found is None:
            found = self.__dict__["_code"] = self.text if self.text is not None else self.module.code
        return found

    def source(self, node: cst.CSTNode) -> str:
        """`node`'s text as it stands in the file. LibCST's `code_for_node` renders a node at
        column 0, so the lines of a multi-line expression inside a block lose the block's
        indentation; rendering with the enclosing blocks' indentation gives them back."""
        module = self.module
        if node is module:
            return self.code  # the same text (no enclosing block to indent it)
        plain = _plain_dotted(node)
        if plain is not None:
            return plain  # `device`, `args.device`: what rendering gives, without the walk up
        state = PlainCodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
        state.indent_tokens = block_indents(module, self.ancestors(node))
        node._codegen(state)
        return "".join(state.tokens)

    def statement_of(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The statement (small statement or compound statement) that contains `node`."""
        current: Optional[cst.CSTNode] = node
        parent_of = self.index.parent
        while current is not None:
            if isinstance(current, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return current
            current = parent_of.get(current)
        return None

    def function_of(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:  # replaced per instance (see __init__)
        return self.scopes.function_of(node)

    def class_of_method(self, function: Optional[cst.FunctionDef]) -> Optional[cst.ClassDef]:
        """The class whose body defines `function` directly."""
        if function is None:
            return None
        scope = self.scopes.scope_of(function)
        return scope if type(scope) is cst.ClassDef else None

    def is_expression_statement(self, node: cst.CSTNode) -> bool:
        """Whether `node` is a whole statement on its own (its value is discarded)."""
        parent = self.parent(node)
        return type(parent) is cst.Expr and parent.value is node

    # -- dataflow ---------------------------------------------------------------------------
    def reaching_definition(self, name: cst.Name) -> Optional[Def]:
        """The definition that gives `name` its value where it is read, when only one can."""
        definitions = self.values.flow.reaching(name)
        return definitions[0] if definitions and len(definitions) == 1 else None

    def assigned_call_package(self, expr: cst.BaseExpression) -> Optional[str]:
        """The top-level package of the call the name `expr` is certainly bound to (`pandas` for
        `df = pd.DataFrame(...)`, `paddle` for `opt = paddle.optimizer.SGD(...)`), or None."""
        value = self.assigned_value(expr) if isinstance(expr, cst.Name) else None
        if not isinstance(value, cst.Call):
            return None
        name = self.qualified_name(value.func)
        return name.split(".")[0] if name else None

    def assigned_value(self, node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """For a name, the one expression certainly assigned to it where it is read (followed
        through plain copies `b = a`); for anything else the node itself; None when the name may
        hold more than one value there."""
        seen = set()
        while type(node) is cst.Name and id(node) not in seen:
            seen.add(id(node))
            definitions = self.values.flow.reaching(node)
            if not definitions or len(definitions) != 1:
                return None
            definition = definitions[0]
            if definition.kind != "assign" or definition.path != () or definition.value is None:
                return None
            node = definition.value
        return node

    def binds_in(self, node: cst.CSTNode, name: str) -> bool:
        """Whether anything in `node` may bind `name` (an assignment, a loop or `with` target, an
        import, a nested def)."""
        return self.values.flow.binds_in(node, name)

    # -- loops ------------------------------------------------------------------------------
    def enclosing_loops(self, node: cst.CSTNode, comprehensions: bool = False) -> List[cst.CSTNode]:
        """For/While loops whose body holds `node`, innermost first, within its function. With
        `comprehensions`, also comprehensions that repeat `node` (it is in their element, not
        their iterable)."""
        loops = []
        child = node
        index = self.index
        above = index.above
        preorder = index.preorder
        up = index.parent_number(node)
        while up >= 0:
            ancestor = preorder[up]
            kind = type(ancestor)
            if kind is cst.SimpleStatementLine or kind is cst.IndentedBlock:
                # Everything above a statement line or block is the same for every node in it.
                key = (id(ancestor), comprehensions)
                outer = self._loops_above.get(key)
                if outer is None:
                    outer = self._loops_above[key] = self.enclosing_loops(ancestor, comprehensions)
                return loops + outer
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
            up = above[up]
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
        if type(func) is cst.Name:
            return [f for f in self._functions_by_name.get(func.value, []) if self.class_of_method(f) is None]
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
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
            type(call) is cst.Call and type(call.func) is cst.Name and call.func.value == "zero_grad"
        )

    # -- modules ----------------------------------------------------------------------------
    def _is_module_base(self, base: cst.BaseExpression) -> bool:
        name = self.qualified_name(base)
        if name is None:
            if self.project is None:
                return False
            name = self.scopes.import_name(base)  # `class Net(Base)` after `from .base import Base`
            if name is None:
                return False
        if name in _MODULE_BASES:
            return True
        if self.project is not None:
            fact = self.project.fact(name)
            if fact is not None and fact.kind == "module class":
                return True  # `class Net(BaseNet)`, `BaseNet` an nn.Module of another project file
        parts = name.split(".")
        return (
            len(parts) == 3 and parts[:2] == ["torch", "nn"] and parts[2][:1].isupper()
            and parts[2] not in _NN_NON_MODULES
        )

    def module_classes(self) -> Set[cst.ClassDef]:
        """Classes that subclass `torch.nn.Module`, directly, through an alias, or through
        another class of this file."""
        if self._module_classes is None:
            found = self.classes_deriving(self._is_module_base)
            self._module_classes = found
            self._module_class_ids = frozenset(id(c) for c in found)
        return self._module_classes

    def classes_deriving(self, is_base: Callable[[cst.BaseExpression], bool]) -> Set[cst.ClassDef]:
        """Classes of this file with a base for which `is_base` holds, or a base that is such a
        class of this file (to any depth: a fixpoint over the file's classes)."""
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
                    if (local is not None and local in found) or is_base(base):
                        found.add(klass)
                        changed = True
                        break
        return found

    def is_module_class(self, klass: Optional[cst.CSTNode]) -> bool:
        """Whether `klass` is one of `module_classes()` (by identity: no node hashing)."""
        if self._module_classes is None:
            self.module_classes()
        return id(klass) in self._module_class_ids

    def module_class_of(self, node: cst.CSTNode) -> Optional[cst.ClassDef]:
        """The nn.Module subclass whose method contains `node`."""
        function = self.function_of(node)
        while function is not None:
            klass = self.class_of_method(function)
            if klass is not None:
                return klass if self.is_module_class(klass) else None
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
            and self.is_module_class(self.class_of_method(method))
        )


def _plain_dotted(node: cst.CSTNode) -> Optional[str]:
    """`a.b.c` for a Name/Attribute chain written without parentheses or space around its dots
    (exactly the code LibCST renders for it), else None."""
    parts: List[str] = []
    while type(node) is cst.Attribute:
        dot = node.dot
        if node.lpar or node.attr.lpar or type(dot.whitespace_before) is not cst.SimpleWhitespace \
                or type(dot.whitespace_after) is not cst.SimpleWhitespace \
                or dot.whitespace_before.value or dot.whitespace_after.value:
            return None
        parts.append(node.attr.value)
        node = node.value
    if type(node) is not cst.Name or node.lpar:
        return None
    parts.append(node.value)
    return ".".join(reversed(parts))


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
