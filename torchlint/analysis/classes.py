"""The value model's attributes and classes: `obj.attr` of modules, tensors and same-file
classes (the join of what the class's methods assign), instances, base classes, and the
Dropout/BatchNorm layers a class holds."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchlint.analysis import torch_api as api
from torchlint.analysis.frames import Frame
from torchlint.analysis.torch_semantics import string_text
from torchlint.analysis.value import (
    AG_LEAF, AG_NONE, AG_UNKNOWN, BATCH, BOTTOM, CLASS, CONTAINER, DEVICE, DTYPE, FUNCTION, INPUT, INSTANCE,
    LAYOUT_CONTIGUOUS, LAYOUT_NOT_KNOWN, MODULE, NUMBER_VALUE, OPTIMIZER, PARAMETER, TENSOR, TENSOR_KINDS,
    UNKNOWN, UNKNOWN_VALUE, ModuleInfo, Value, join_all,
)


# Libraries whose classes the analysis knows (an instance of a subclass of theirs is understood).
_SEEN_LIBRARIES = frozenset({"torch", "torchvision", "abc", "typing", "enum", "dataclasses", "collections"})


class ClassValues:
    """Attributes, classes and instances
    (a mixin of `torchlint.analysis.interpreter.Values`)."""

    # -- attributes ----------------------------------------------------------------------------
    def _attribute(self, node: cst.Attribute, frame: Frame) -> Value:
        qualified = self.sem.qualified_name(node)
        if qualified is None and self.sem.project is not None and self.scopes.relative_imports:
            qualified = self.scopes.import_name(node)
        if qualified is not None:
            return self._constant(qualified, node)
        attr = node.attr.value
        owner = self.value(node.value, frame)
        return self.attribute_of(owner, attr, node, frame)

    def attribute_of(self, owner: Value, attr: str, node: cst.CSTNode, frame: Frame) -> Value:
        kind = owner.kind
        if kind == BOTTOM:
            return owner
        if kind in (MODULE, INSTANCE):
            klass = owner.module.klass if owner.module is not None else owner.detail
            if type(klass) is cst.ClassDef:
                if self.attribute_writes(klass, attr):
                    value = self.class_attribute(klass, attr)
                    if value.kind == MODULE and value.device is None and owner.device is not None:
                        value = value.but(device=owner.device)
                    return value
                method = self.method(klass, attr)
                if method is not None:
                    return Value(FUNCTION, AG_NONE, detail=method, site=owner)
            if kind == MODULE:
                return self._module_attribute(owner, attr)
            return UNKNOWN_VALUE
        if kind in TENSOR_KINDS or kind == INPUT or kind == BATCH:
            return self._tensor_attribute(owner, attr, node, frame)
        if kind == UNKNOWN and attr == "data":
            # Only tensors (and parameters) have a `.data` used as one: a tensor of unknown origin.
            return Value(TENSOR, AG_NONE, LAYOUT_CONTIGUOUS, device=owner.device)
        if kind == OPTIMIZER and attr == "param_groups":
            group = Value(CONTAINER, AG_NONE, detail="param_group",
                          element=Value(CONTAINER, AG_NONE, element=self._parameter(None, owner.device)))
            return Value(CONTAINER, AG_NONE, element=group)
        if kind == CLASS and type(owner.detail) is cst.ClassDef:
            method = self.method(owner.detail, attr)
            if method is not None:
                return Value(FUNCTION, AG_NONE, detail=method)
        return UNKNOWN_VALUE

    def _module_attribute(self, owner: Value, attr: str) -> Value:
        info = owner.module
        if attr in ("weight", "bias") and info is not None and (info.klass is None or info.qualified):
            if info.stateless:
                return UNKNOWN_VALUE
            return self._parameter(owner.site, owner.device)
        if attr == "training":
            return NUMBER_VALUE
        if info is not None and info.qualified is not None and info.qualified.startswith("torchvision.models."):
            return Value(MODULE, AG_NONE, module=ModuleInfo(stochastic=self._torchvision_part(owner, attr)),
                         device=owner.device)
        return UNKNOWN_VALUE

    def _torchvision_part(self, model: Value, part: str) -> Optional[str]:
        """`alexnet().classifier` holds Dropout: the description, unless the constructor call
        passes the keyword that could take the layer out (`dropout=`, `norm_layer=`)."""
        found = api.torchvision_stochastic_part(model.module.qualified, part)
        if found is None or type(model.site) is not cst.Call:
            return None
        layer, keyword = found
        if any(arg.star or arg.keyword is not None and arg.keyword.value == keyword for arg in model.site.args):
            return None
        member = model.module.qualified.rsplit(".", 1)[-1]
        return f"{layer} (torchvision {member}'s `{part}`)"

    def _parameter(self, owner_site, device) -> Value:
        return Value(PARAMETER, AG_LEAF, LAYOUT_CONTIGUOUS, device=device, site=owner_site)

    def _tensor_attribute(self, owner: Value, attr: str, node, frame) -> Value:
        if attr in api.TRANSPOSING_ATTRIBUTES:
            return self._transposed(owner, attr, (), node)
        if attr == "data":
            return owner.but(autograd=AG_NONE, kind=TENSOR, activation=None, alias=None)
        if attr == "grad":
            return Value(TENSOR, AG_NONE, LAYOUT_CONTIGUOUS, device=owner.device, optional=True)
        if attr in ("real", "imag"):
            return owner.but(layout=LAYOUT_NOT_KNOWN)
        if attr == "shape":
            return Value(CONTAINER, AG_NONE, element=NUMBER_VALUE, detail="shape")
        if attr == "dtype":
            return Value(DTYPE, AG_NONE, detail=owner.dtype)
        if attr == "device":
            return Value(DEVICE, AG_NONE, detail=owner.device)
        if attr in ("ndim", "requires_grad", "is_cuda", "is_leaf", "grad_fn"):
            return NUMBER_VALUE if attr != "grad_fn" else UNKNOWN_VALUE
        return UNKNOWN_VALUE

    def _constant(self, qualified: str, node: cst.CSTNode) -> Value:
        member = api.torch_member(qualified)
        if qualified.startswith("torch.") and qualified.count(".") == 1 and api.is_dtype_name(member):
            return Value(DTYPE, AG_NONE, detail=member)
        return self._project_value(qualified)

    def _compute_class_attribute(self, klass: cst.ClassDef, name: str) -> Value:
        writes = self.attribute_writes(klass, name)
        if not writes:
            return UNKNOWN_VALUE
        values = []
        for value_expr, target, path, method in writes:
            if isinstance(value_expr, Value):
                values.append(value_expr)
                continue
            if value_expr is None:
                values.append(UNKNOWN_VALUE)
                continue
            frame = self.generic_frame(method) if method is not None else self._module_frame
            value = self.value(value_expr, frame)
            if path is None:
                value = Value(CONTAINER, AG_NONE, element=self._iterate(value))
            elif path:
                value = self._element_at(value, path)
            values.append(value)
        return join_all(values)

    def _writes_of(self, klass: cst.ClassDef) -> Dict[str, list]:
        """attr -> [(value expression | Value | None, target, path, method)] for one class."""
        key = id(klass)
        found = self._class_writes.get(key)
        if found is not None:
            return found
        found = {}
        index = self.index
        for statement in klass.body.body:
            if type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    if type(small) is cst.Assign:
                        for target in small.targets:
                            if type(target.target) is cst.Name:
                                found.setdefault(target.target.value, []).append((small.value, target.target, (), None))
                    elif type(small) is cst.AnnAssign and type(small.target) is cst.Name and small.value is not None:
                        found.setdefault(small.target.value, []).append((small.value, small.target, (), None))
        for attribute in index.descendants(klass, cst.Attribute):
            receiver = attribute.value
            if type(receiver) is not cst.Name or receiver.value != "self":
                continue
            method = self.sem.method_of(attribute)
            if method is None or self.sem.class_of_method(method) is not klass:
                continue
            parent = index.parent.get(attribute)
            path: Optional[Tuple[int, ...]] = ()
            child = attribute
            trail: List[int] = []
            while type(parent) in (cst.Element, cst.StarredElement, cst.Tuple, cst.List):
                if type(parent) is cst.StarredElement:
                    path = None
                if type(parent) in (cst.Tuple, cst.List):
                    trail.append(next(i for i, e in enumerate(parent.elements) if e is child))
                child, parent = parent, index.parent.get(parent)
            if path is not None:
                path = tuple(reversed(trail))
            name = attribute.attr.value
            kind = type(parent)
            if kind is cst.AssignTarget and parent.target is child:
                statement = index.parent.get(parent)
                found.setdefault(name, []).append((statement.value, attribute, path, method))
            elif kind is cst.AnnAssign and parent.target is child and parent.value is not None:
                found.setdefault(name, []).append((parent.value, attribute, path, method))
            elif kind is cst.AugAssign and parent.target is child:
                found.setdefault(name, []).append((None, attribute, (), method))
        for call in index.descendants(klass, cst.Call):
            func = call.func
            if type(func) is not cst.Attribute or type(func.value) is not cst.Name or func.value.value != "self":
                continue
            if func.attr.value in ("register_buffer", "register_parameter", "add_module", "register_module") \
                    and len(call.args) >= 2 and type(call.args[0].value) is cst.SimpleString:
                name = string_text(call.args[0].value)
                method = self.sem.method_of(call)
                if name is not None:
                    found.setdefault(name, []).append((call.args[1].value, call, (), method))
        for call in index.descendants(klass, cst.Call):
            if type(call.func) is cst.Name and call.func.value == "setattr" and len(call.args) == 3 \
                    and type(call.args[0].value) is cst.Name and call.args[0].value.value == "self":
                first = call.args[1].value
                if type(first) is cst.SimpleString:
                    name = string_text(first)
                    if name is not None:
                        found.setdefault(name, []).append((call.args[2].value, call, (), self.sem.method_of(call)))
                else:
                    found.setdefault("*", []).append((None, call, (), None))
        self._class_writes[key] = found
        return found

    def _mro(self, klass: cst.ClassDef) -> List[cst.ClassDef]:
        order = [klass]
        pending = [klass]
        while pending:
            current = pending.pop(0)
            for base in current.bases:
                if type(base.value) is cst.Name:
                    for other in self._classes_named(base.value.value):
                        if other not in order:
                            order.append(other)
                            pending.append(other)
        return order

    def _is_base(self, base: cst.BaseExpression, names) -> bool:
        qualified = self.sem.qualified_name(base)
        return qualified is not None and qualified in names

    def instance_of(self, klass: cst.ClassDef, site) -> Value:
        if self.sem.is_module_class(klass):
            return Value(MODULE, AG_NONE, module=ModuleInfo(klass=klass), site=site, dtype="float32")
        if any(self._is_base(base.value, api.OPTIMIZER_BASES) for base in klass.bases):
            return Value(OPTIMIZER, AG_NONE, site=site, detail=klass)
        # An instance of a class with a base the analysis cannot see (`class Net(Base)`, `Base`
        # imported) is not certainly free of a graph: it may be a tensor subclass or hold one.
        autograd = AG_UNKNOWN if self._has_unseen_base(klass) else AG_NONE
        return Value(INSTANCE, autograd, detail=klass, site=site)

    def _has_unseen_base(self, klass: cst.ClassDef) -> bool:
        for each in self._mro(klass):
            for base in each.bases:
                name = base.value.value if type(base.value) is cst.Name else None
                if name is not None and (name == "object" or self._classes_named(name)):
                    continue
                qualified = self.sem.qualified_name(base.value)
                if qualified is not None and qualified.split(".")[0] in _SEEN_LIBRARIES:
                    continue
                return True
        return False

    def _class_stochastic(self, klass: cst.ClassDef) -> Optional[str]:
        key = ("stochastic", id(klass))
        cached = self._memo.get(key)
        if cached is not None:
            return cached.detail
        self._memo[key] = Value(UNKNOWN, detail=None)  # recursion guard
        found = None
        for each in self._mro(klass):
            for name in self._writes_of(each):
                if not self._may_run_attribute(klass, name):
                    continue  # `self.dropout = nn.Dropout(p)` that no method calls
                value = self.class_attribute(klass, name)
                candidates = [value]
                if value.kind == CONTAINER and value.element is not None:
                    candidates.append(value.element)
                for candidate in candidates:
                    if candidate.kind == MODULE and candidate.module is not None:
                        if candidate.module.klass is klass:
                            continue
                        layer = self.stochastic_layer(candidate)
                        if layer is not None:
                            found = layer if candidate.module.klass is not None else f"{layer} in `{klass.name.value}`"
                            break
                if found:
                    break
            if found:
                break
        if found is None:
            inherited = self.inherited_stochastic(klass)
            found = inherited[0][1] if inherited else None
        self._memo[key] = Value(UNKNOWN, detail=found)
        return found

    def _may_run_attribute(self, klass: cst.ClassDef, name: str) -> bool:
        """Whether a method of `klass` (or of its same-file bases and subclasses) may run the
        submodule stored in `self.<name>`: some read of it other than a store, outside an
        `if self.<flag>:` whose flag the classes only ever set to False. Always, where the
        classes reach their submodules another way (`getattr(self, ...)`, `self.children()`,
        `self.modules()`, `self._modules`, `self.named_*`), define no `forward`, or the attribute
        is `"*"`."""
        if name == "*":
            return True
        classes = self._mro(klass)
        if not any(type(s) is cst.FunctionDef and s.name.value == "forward"
                   for each in classes for s in each.body.body):
            return True  # no `forward` here: a base of another file runs it, or callers use the parts
        classes += [other for other in self.index.nodes(cst.ClassDef)
                    if other not in classes and klass in self._mro(other)]
        for each in classes:
            for node in self.index.descendants(each, cst.Call):
                func = node.func
                if type(func) is cst.Name and func.value == "getattr" or type(func) is cst.Attribute and \
                        type(func.value) is cst.Name and func.value.value == "self" and \
                        func.attr.value in ("children", "modules", "named_children", "named_modules"):
                    return True
            for node in self.index.descendants(each, cst.Attribute):
                if type(node.value) is not cst.Name or node.value.value != "self":
                    continue
                if node.attr.value == "_modules":
                    return True
                if node.attr.value != name or self._is_store(node):
                    continue
                if not self._under_false_flag(node, classes):
                    return True
        return False

    def _is_store(self, node: cst.Attribute) -> bool:
        parent = self.index.parent.get(node)
        return type(parent) in (cst.AssignTarget, cst.AnnAssign, cst.AugAssign) and \
            getattr(parent, "target", None) is node

    def _under_false_flag(self, node: cst.CSTNode, classes: List[cst.ClassDef]) -> bool:
        """`node` is in the body of `if self.flag:` (or `if self.flag and ...:`) where every write
        of `self.flag` in `classes` is the literal False."""
        child = node
        parent = self.index.parent.get(node)
        while parent is not None and type(parent) is not cst.FunctionDef:
            if type(parent) is cst.If and child is parent.body:
                test = parent.test
                while type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
                    test = test.left
                if type(test) is cst.Attribute and type(test.value) is cst.Name and test.value.value == "self":
                    writes = [w for each in classes for w in self._writes_of(each).get(test.attr.value, [])]
                    if writes and all(isinstance(w[0], cst.Name) and w[0].value == "False" for w in writes):
                        return True
            child, parent = parent, self.index.parent.get(parent)
        return False

    def held_stochastic(self, klass: cst.ClassDef) -> List[Tuple[str, str]]:
        """(attribute, description) for every attribute of `klass` (assigned by it or its
        same-file bases) that certainly holds a Dropout/BatchNorm layer: what another file's
        subclass of `klass` inherits (`torchlint.analysis.project`'s summary of the class)."""
        found: List[Tuple[str, str]] = []
        seen = set()
        for each in self._mro(klass):
            for name in self._writes_of(each):
                if name in seen or name == "*":
                    continue
                seen.add(name)
                value = self.class_attribute(klass, name)
                candidates = [value]
                if value.kind == CONTAINER and value.element is not None:
                    candidates.append(value.element)
                for candidate in candidates:
                    if candidate.kind == MODULE and candidate.module is not None and candidate.module.klass is not klass:
                        layer = self.stochastic_layer(candidate)
                        if layer is not None:
                            found.append((name, layer if candidate.module.klass is not None
                                          else f"{layer} in `{klass.name.value}`"))
                            break
        return found

    def _initialises_base(self, klass: cst.ClassDef) -> bool:
        """Whether `klass` leaves its bases' `__init__` to run: it defines none, or its own calls
        one (`super().__init__(...)`, `Net.__init__(self)`)."""
        init = next((s for s in klass.body.body if type(s) is cst.FunctionDef and s.name.value == "__init__"), None)
        if init is None:
            return True
        for call in self.index.descendants(init, cst.Call):
            func = call.func
            if type(func) is not cst.Attribute or func.attr.value != "__init__":
                continue
            owner = func.value
            if type(owner) is cst.Call and type(owner.func) is cst.Name and owner.func.value == "super":
                return True
            if not (self.sem.qualified_name(owner) or "").startswith("torch."):
                return True  # `Net.__init__(self)`; not `nn.Module.__init__(self)`, which skips `Net`'s
        return False

    def inherited_stochastic(self, klass: cst.ClassDef) -> List[Tuple[str, str]]:
        """(attribute, description) for each Dropout/BatchNorm layer `klass` inherits from a
        base class of another project file (`class Mine(Net)` after `from model import Net`),
        by the attribute that file's summary says holds it, when no class here assigns that
        attribute again (`self.drop = nn.Identity()`) nor deletes it. Nothing when a write here
        may replace any attribute (`setattr(self, name, ...)` with a computed name) or an
        `__init__` here never runs the base's (`nn.Module.__init__(self)` alone)."""
        if self.sem.project is None:
            return []
        mro = self._mro(klass)
        written = set()
        for each in mro:
            written.update(self._writes_of(each))
            for deletion in self.index.descendants(each, cst.Del):
                for node in self.index.descendants(deletion, cst.Attribute):
                    if type(node.value) is cst.Name and node.value.value == "self":
                        written.add(node.attr.value)
        if "*" in written or not all(self._initialises_base(each) for each in mro):
            return []
        found: List[Tuple[str, str]] = []
        for each in mro:
            for base in each.bases:
                if type(base.value) is cst.Name and self._classes_named(base.value.value):
                    continue  # a base of this file: its attributes are the same-file walk's
                qualified = self.scopes.import_name(base.value)
                fact = self._project_fact(qualified) if qualified is not None else None
                if fact is None or fact.kind != "module class" or fact.value.module is None:
                    continue
                for name, layer in fact.value.module.held or ():
                    if name not in written and all(name != other for other, _ in found):
                        found.append((name, layer))
        return found
