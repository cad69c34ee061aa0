"""Dead stores: an assignment to a name whose value no later read of the name can see (it is
overwritten, or the function ends, before anything reads it), by the may-reach definitions of
`analysis/flow.py`. Unknown (a closure, `global`, a binding the flow cannot follow) is "not dead"."""

from __future__ import annotations

from typing import Optional

import libcst as cst


def is_dead_store(sem, target: cst.Name) -> Optional[bool]:
    """Whether the value assigned to `target` (a Name in a store position) is never read: True
    when no read of the name in its scope may see it, False when one may, None when unknown."""
    flow = sem.values.flow
    definition = flow.definition_of_store(target)
    if definition is None:
        return None
    scope = sem.scopes.scope_of(target)
    index = sem.index
    for use in index.names_spelled(target.value):
        if use is target:
            continue
        owner = sem.scopes.scope_of(use)
        if owner is not scope:
            if owner is not None and index.contains(scope, owner):
                return None  # read (or written) by a nested function or comprehension
            continue
        parent = sem.parent(use)
        if isinstance(parent, cst.AugAssign) and parent.target is use:
            reaching = flow.reaching_at(parent, use.value)
        elif flow.definition_of_store(use) is not None:
            continue  # another store
        elif isinstance(parent, (cst.Global, cst.Nonlocal)) or isinstance(parent, cst.NameItem):
            return None
        else:
            reaching = flow.reaching(use)
        if reaching is None:
            return None
        if any(d.target is target for d in reaching):
            return False
    return True
