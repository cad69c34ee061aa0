"""The documentation: docs/rules/ is what the rules generate, a finding's `url` names the page,
the site builds with `mkdocs build --strict`, and the user-facing text carries no internal
words."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "generate_rule_docs.py"


def _generator():
    spec = importlib.util.spec_from_file_location("generate_rule_docs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rule_pages_match_the_rules():
    problems = _generator().drift()
    assert not problems, "\n".join(problems) + "\nrun `python scripts/generate_rule_docs.py`"


def test_one_page_per_rule_and_it_is_what_torchlint_rule_prints():
    from torchlint.rules import all_codes

    pages = {path.stem for path in (ROOT / "docs" / "rules").glob("TL*.md")}
    assert pages == set(all_codes())
    for code in ("TL001", "TL120", all_codes()[-1]):
        printed = subprocess.run([sys.executable, "-m", "torchlint", "rule", code], capture_output=True,
                                 text=True, cwd=ROOT, timeout=120).stdout
        assert printed == (ROOT / "docs" / "rules" / f"{code}.md").read_text(encoding="utf-8")


def test_drift_is_detected(tmp_path):
    """A stale, a missing and an extra page are each named."""
    generator = _generator()
    for name, text in generator.pages().items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    assert generator.drift(tmp_path) == []
    (tmp_path / "TL004.md").write_text("old text\n", encoding="utf-8")
    (tmp_path / "TL001.md").unlink()
    (tmp_path / "TL999.md").write_text("gone\n", encoding="utf-8")
    problems = "\n".join(generator.drift(tmp_path))
    assert "stale" in problems and "TL004.md" in problems
    assert "missing" in problems and "TL001.md" in problems
    assert "no such rule" in problems and "TL999.md" in problems


def test_check_mode_exit_status():
    result = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_url_names_the_rule_page():
    from torchlint.rule_codes import DOCS_URL, rule_url
    from torchlint.rules import all_rules

    assert DOCS_URL == "https://torchlint.github.io/torchlint"
    for rule in all_rules():
        assert rule.url() == rule_url(rule.code) == f"{DOCS_URL}/rules/{rule.code}/"
        # mkdocs (use_directory_urls) serves docs/rules/TL001.md at rules/TL001/
        assert (ROOT / "docs" / "rules" / f"{rule.code}.md").exists()
    assert rule_url("TL901") is None and rule_url("tl004") == f"{DOCS_URL}/rules/TL004/"
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert f"site_url: {DOCS_URL}/" in config


def test_json_and_sarif_carry_the_page(tmp_path):
    (tmp_path / "m.py").write_text("import torch\n\ndef f(x):\n    return x.transpose(0, 1).view(-1)\n")
    result = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "--output-format", "json", "m.py"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    (finding,) = json.loads(result.stdout)
    assert finding["url"] == "https://torchlint.github.io/torchlint/rules/TL004/"
    result = subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", "--output-format", "sarif", "m.py"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    rules = json.loads(result.stdout)["runs"][0]["tool"]["driver"]["rules"]
    assert {r["helpUri"] for r in rules if r["id"] == "TL004"} == {finding["url"]}


def test_mkdocs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]' (the test extra installs it)")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "rules" / "TL001" / "index.html").exists()
    assert (tmp_path / "site" / "design" / "index.html").exists()


# Words of the project's own bookkeeping that mean nothing to a user.
_INTERNAL = re.compile(r"\bissues? \d+|\bstop \d+|\bstops \d+|value model|\bitem \d+ of issue", re.I)
USER_FACING = ["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "mkdocs.yml", *sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("name", USER_FACING)
def test_no_internal_words(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    found = sorted({m.group(0) for m in _INTERNAL.finditer(text)})
    assert not found, f"{name}: {found}"


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 300, f"README.md has {lines} lines; move details to docs/"


def test_changelog_and_contributing_exist():
    assert (ROOT / "CHANGELOG.md").read_text(encoding="utf-8").startswith("# Changelog")
    assert "generate_rule_docs.py" in (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")


def test_license_is_an_spdx_expression():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        pytest.skip("tomllib needs Python 3.11")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert data["project"]["license"] == "MIT"
    assert "setuptools>=77" in data["build-system"]["requires"]  # the first to take an SPDX string
    assert "mkdocs" in data["project"]["optional-dependencies"]["test"]
    assert "mkdocs" in data["project"]["optional-dependencies"]["docs"]
    assert "mkdocs==" in (ROOT / "constraints.txt").read_text()


def test_integrations_page_repeats_the_readme_snippets():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    for pattern in (r"```yaml\n# \.pre-commit-config\.yaml\n.*?```", r"```ini\n\[flake8\]\n.*?```",
                    r"```yaml\n# \.github/workflows/torchlint\.yml\n.*?```"):
        (snippet,) = re.findall(pattern, readme, re.S)
        assert snippet in page, f"docs/integrations.md differs from the README: {snippet[:60]}"
