"""What every rule is: metadata, documentation, and a matcher over indexed nodes.

A rule names the node types it looks at (`node_types`); the engine hands it each node of those
types, in document order, after the single traversal has built the semantic model. A rule reports
through the context; it never walks the tree itself except to look at a node's own children.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Optional, Sequence, Tuple, Type, Union

import libcst as cst

from torchlint.finding import Applicability, Severity

if TYPE_CHECKING:
    from torchlint.analysis.semantic import Semantic


@dataclass(frozen=True)
class Replace:
    """Replace `node`'s source with `content` (code text, or a node rendered with the module's
    style)."""

    node: cst.CSTNode
    content: Union[str, cst.CSTNode]


@dataclass(frozen=True)
class InsertBefore:
    """Insert `text` before `node` (a statement) as a new line with the same indentation."""

    node: cst.CSTNode
    text: str


@dataclass(frozen=True)
class RemoveLines:
    """Remove the lines `node` (a statement alone on them) spans, their line break included."""

    node: cst.CSTNode


@dataclass(frozen=True)
class Rebracket:
    """Replace the opening bracket that starts `opening_node` (a `LeftParen`) with `opening` and
    the closing one that ends `closing_node` (a `RightParen`) with `closing`, leaving everything
    between as written: `(a,\n b)` becomes `nn.ModuleList([a,\n b])` with its layout and comments."""

    opening_node: cst.CSTNode
    closing_node: cst.CSTNode
    opening: str
    closing: str


Edit = Union[Replace, InsertBefore, Rebracket, RemoveLines]


@dataclass(frozen=True)
class FixSpec:
    message: str
    edits: Tuple[Edit, ...]
    applicability: Applicability = Applicability.SAFE


@dataclass(frozen=True)
class Report:
    rule: "Rule"
    node: cst.CSTNode
    message: str
    fix: Optional[FixSpec] = None
    # None: the rule's `default_severity`. Rules decide it per finding from the program's facts.
    severity: Optional[Severity] = None
    # (path, row, column, label) of places in other project files the message names.
    related: Tuple[Tuple[str, int, int, str], ...] = ()


class RuleContext:
    """What a rule sees of the file being linted."""

    def __init__(self, semantic: "Semantic", path: str) -> None:
        self.semantic = semantic
        self.path = path
        self.reports: list = []
        self._rule: Optional[Rule] = None
        # The `async=` arguments the engine rewrote as `non_blocking=` so the file parses (TL204).
        self.rewritten_async_arguments: Tuple[cst.Arg, ...] = ()

    def report(self, node: cst.CSTNode, message: str, fix: Optional[FixSpec] = None,
               severity: Optional[Severity] = None) -> None:
        assert self._rule is not None
        self.reports.append(Report(self._rule, node, message, fix, severity, self._related(message)))

    def _related(self, message: str) -> Tuple[Tuple[str, int, int, str], ...]:
        """The other project files a message names ("model.py:4"): the value model took a fact
        from there, so the finding carries them as related locations."""
        project = self.semantic.project
        if project is None or not project.origins:
            return ()
        return tuple((path, line, column, origin) for origin, (path, line, column) in sorted(project.origins.items())
                     if origin in message)

    def code(self, node: cst.CSTNode) -> str:
        """The source text of `node` as the file has it, for messages that quote what the user
        wrote and for fixes that keep it."""
        return self.semantic.source(node)

    def short(self, node: cst.CSTNode, limit: int = 60) -> str:
        text = " ".join(self.code(node).split())
        return text if len(text) <= limit else text[: limit - 1] + "…"


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, as ruff names rules
    summary: ClassVar[str]  # one line: what is wrong
    # Markdown with the sections: What it does / Why is this bad? / Example / Use instead: /
    # Fix safety / References
    docs: ClassVar[str]
    fix_availability: ClassVar[str] = "none"  # "none", "sometimes", "always"
    # The severity of a finding whose report names none (see `Severity`).
    default_severity: ClassVar[Severity] = Severity.WARNING
    # Markdown for `torchlint rule CODE`'s "## Severity" section: when a finding is an error and
    # when it is less. Empty: one sentence derived from `default_severity` (`severity_text()`).
    severity_docs: ClassVar[str] = ""
    # The rule can only fire on a file containing one of these strings (soundly: every finding
    # of the rule needs one of them in the source). Used to skip the parse.
    triggers: ClassVar[Tuple[str, ...]] = ()
    # The fact a trigger names may live in a project file this one imports (`Dropout` of a model
    # defined in model.py, the `device` of config.py): the pre-filter then also searches those
    # files' text for the triggers. Other rules' triggers must stand in the file itself.
    cross_file_triggers: ClassVar[bool] = False
    node_types: ClassVar[Sequence[Type[cst.CSTNode]]] = ()
    # The method or function names of the only calls `check` can report on (`step`, `append`):
    # the calls it is handed then come from the file's name table instead of every call.
    # Empty: every call.
    called_names: ClassVar[frozenset] = frozenset()
    # Where the rule's runtime confirmation cases live (torchlint/verify/cases/<module>.py).
    confirmation_module: ClassVar[str] = ""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        raise NotImplementedError

    def candidates(self, node_type: Type[cst.CSTNode], semantic: "Semantic") -> Optional[Sequence[cst.CSTNode]]:
        """The nodes of `node_type` that `check` can report on, in document order, when the rule
        can name them more cheaply than by looking at every one (the `Name` nodes spelled like a
        table entry); None: every node of the type. By default the calls of `called_names`."""
        if node_type is cst.Call and self.called_names:
            return semantic.index.calls_named(self.called_names)
        return None

    @classmethod
    def severity_text(cls) -> str:
        """The "## Severity" section's text: `severity_docs`, else the section written in `docs`,
        else what `default_severity` means."""
        if cls.severity_docs:
            return cls.severity_docs.strip()
        docs = "\n" + getattr(cls, "docs", "")
        if "\n## Severity\n" in docs:
            return docs.split("\n## Severity\n", 1)[1].split("\n## ", 1)[0].strip()
        return _DEFAULT_SEVERITY_DOCS[cls.default_severity]

    @classmethod
    def severity_range(cls) -> Tuple[Severity, Severity]:
        """(the least, the most) severe a finding of the rule can be: its `default_severity` and
        the severities its "## Severity" section names in bold (`An **error** when ...`)."""
        import re

        named = {Severity(word) for word in re.findall(r"\*\*(error|warning|note)s?\*\*", cls.severity_text())}
        levels = sorted(named | {cls.default_severity}, key=lambda level: level.rank)
        return levels[-1], levels[0]

    @classmethod
    def severity_range_text(cls) -> str:
        """`note–error`, or one word when a rule's findings always have the same severity."""
        least, most = cls.severity_range()
        return most.value if least is most else f"{least.value}–{most.value}"

    @classmethod
    def url(cls) -> str:
        """The rule's page on the documentation site (docs/rules/<CODE>.md, generated from the rule)."""
        from torchlint.rule_codes import DOCS_URL

        return f"{DOCS_URL}/rules/{cls.code}/"


_DEFAULT_SEVERITY_DOCS = {
    Severity.ERROR: "Findings of this rule are errors: the program crashes, or trains or evaluates wrongly, "
                    "on the current PyTorch.",
    Severity.WARNING: "Findings of this rule are warnings: the harm depends on the scale or the data "
                      "(memory per batch, shapes that occur only sometimes).",
    Severity.NOTE: "Findings of this rule are notes: hygiene with no effect on the results today "
                   "(a deprecated spelling that still works).",
}
