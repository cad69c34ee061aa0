"""`analysis/` reads as one picture: no cycle of imports among its modules, of any length
(imports inside functions and under TYPE_CHECKING count, and a package may import its own
submodules, as in test_layers)."""

from __future__ import annotations

from test_layers import _imports


def _cycles(graph: dict) -> list:
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_in_analysis():
    imports = _imports()
    # A package and its own submodules may import each other (as in test_layers).
    analysis = {name: {t for t in targets if t.startswith("torchlint.analysis.")
                       and not (t.startswith(name + ".") or name.startswith(t + "."))}
                for name, targets in imports.items() if name.startswith("torchlint.analysis.")}
    assert _cycles(analysis) == []
