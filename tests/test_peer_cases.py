"""The peer linters' own test cases (dslinter, SpecDetect4AI, the ML-smells catalogue), one
fixture file per peer check in fixtures/peers/, checked like fixtures/TL*/ (inline `# expect:`
markers are exactly the findings) with two differences:

- A file names the torchlint codes that cover the check in a header line `# torchlint: TL103`
  (several: `# torchlint: TL107, TL106`); only those codes run, and every marker uses one of them.
- Each peer case starts at a line `# case: positive NAME` or `# case: negative NAME` (NAME: the
  peer's test or example) and is linted as its own program, as the peer's test runs it: the other
  cases' lines are blanked, so line numbers stay those of the file. A negative case marks
  nothing; a positive case marks its findings or says in a `# silent: ...` comment why torchlint
  deliberately stays silent on it (docs/comparisons.md lists these as disagreements). A `# case: variant
  NAME` is torchlint's own edit of a peer case (say, a peer program whose model lacks the layer
  that makes the smell harmful, with that layer added): it marks findings and is not counted as
  the peer's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import List, Tuple

import pytest

from markers import compare, read_markers
from torchlint.engine import lint_source

PEERS = Path(__file__).resolve().parent.parent / "fixtures" / "peers"
FILES = sorted(PEERS.glob("*.py"))
PEERS_URL = "https://github.com/torchlint/torchlint/blob/main/fixtures/peers"

_HEADER = re.compile(r"^#\s*torchlint:\s*(TL\d{3}(?:\s*,\s*TL\d{3})*)\s*$")
_CASE = re.compile(r"^#\s*case:\s*(positive|negative|variant)\s+(\S.*)$")


def covering_codes(source: str) -> List[str]:
    for line in source.splitlines():
        match = _HEADER.match(line.strip())
        if match:
            return [code.strip() for code in match.group(1).split(",")]
    return []


def cases(source: str) -> List[Tuple[str, str, str]]:
    """(kind, name, source with every other case's lines blanked) for each case of the file."""
    lines = source.splitlines(keepends=True)
    starts = [(i, m.group(1), m.group(2).strip()) for i, line in enumerate(lines)
              for m in [_CASE.match(line.strip())] if m]
    result = []
    for index, (start, kind, name) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(lines)
        text = "".join(line if start <= i < end else "\n" for i, line in enumerate(lines))
        result.append((kind, name, text))
    return result


def test_peer_fixtures_exist() -> None:
    assert FILES, "fixtures/peers/ holds no fixture"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_peer_cases(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    codes = covering_codes(source)
    assert codes, f"{path.name} names no covering code (a `# torchlint: TLnnn` header line)"
    found = cases(source)
    assert found, f"{path.name} has no `# case: positive|negative NAME` line"
    message = []
    for kind, name, text in found:
        try:
            ast.parse(text)
        except SyntaxError as error:
            message.append(f"{kind} {name} does not parse: {error}")
            continue
        markers = read_markers(text)
        stray = [str(m) for m in markers if m.code not in codes]
        if stray:
            message.append(f"{kind} {name}: markers for codes the header does not name: {stray}")
        if kind == "negative" and markers:
            message.append(f"negative {name} marks findings: {[str(m) for m in markers]}")
        if kind == "positive" and not markers and "# silent:" not in text:
            message.append(f"positive {name} marks nothing and says no `# silent:` reason")
        if kind == "variant" and not markers:
            message.append(f"variant {name} marks nothing")
        findings = [f for f in lint_source(text, str(path), select=codes) if f.code in codes]
        missing, unexpected = compare(markers, findings)
        if missing:
            message.append(f"{kind} {name}: missing findings:\n  " + "\n  ".join(missing))
        if unexpected:
            message.append(f"{kind} {name}: unexpected findings:\n  " + "\n  ".join(unexpected))
    assert not message, "\n".join(message)


def tally(path: Path) -> Tuple[int, int, int, int]:
    """(positives flagged, positives, negatives silent, negatives) as the fixture marks them."""
    found = cases(path.read_text(encoding="utf-8"))
    positives = [text for kind, _, text in found if kind == "positive"]
    negatives = [text for kind, _, text in found if kind == "negative"]
    flagged = sum(1 for text in positives if read_markers(text))
    return flagged, len(positives), len(negatives), len(negatives)


def test_comparisons_page_counts_match_fixtures() -> None:
    """Each fixture's row in docs/comparisons.md states its counts, linking `fixtures/peers/NAME.py`:
    P of N, S of M."""
    readme = (Path(__file__).resolve().parent.parent / "docs" / "comparisons.md").read_text(encoding="utf-8")
    for path in FILES:
        flagged, positives, silent, negatives = tally(path)
        expected = (f"[{flagged}/{positives} positives flagged, {silent}/{negatives} negatives "
                    f"silent]({PEERS_URL}/{path.name})")
        assert expected in readme, f"docs/comparisons.md lacks or misstates {path.name}: {expected}"
