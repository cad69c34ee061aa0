"""What the shape rules (TL301-TL307) share: their findings come from the file's shape facts
(`torchlint.analysis.tensor_shape.facts`), computed once for all of them and only when one asks."""

from __future__ import annotations

from typing import Optional, Sequence, Type

import libcst as cst

from torchlint.analysis.tensor_shape.facts import shape_facts
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# Every shape finding needs one of these in the file or a project file it imports: a layer,
# a reshaping op, a concatenation or a loss.
SHAPE_TRIGGERS = ("Linear", "Conv", "Norm", "LSTM", "GRU", "RNN", "Attention", "Transformer", "Embedding",
                  "Pool", "pool", "view", "reshape", "flatten", "softmax", "Dropout", "cat", "Loss", "loss", "Normalize",
                  "summary", "Shuffle", "Sequential", "matmul", ".mm(", ".bmm(", ".dot(", " @ ")


class ShapeRule(Rule):
    default_severity = Severity.ERROR
    node_types = (cst.Call,)
    triggers = SHAPE_TRIGGERS
    cross_file_triggers = True

    def candidates(self, node_type: Type[cst.CSTNode], semantic) -> Optional[Sequence[cst.CSTNode]]:
        found = shape_facts(semantic).at(self.code)
        order = semantic.index.order
        return sorted((n for n in found if isinstance(n, node_type)), key=lambda n: order.get(n, 0))

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        for finding in shape_facts(ctx.semantic).at(self.code).get(node, []):
            fix = None
            if finding.fix is not None:
                argument, replacement = finding.fix
                fix = FixSpec(f"Write {replacement}", (Replace(argument, replacement),), Applicability.UNSAFE)
            ctx.report(node, finding.message, fix=fix, severity=Severity.ERROR)
