"""Notebooks: real .ipynb files through the CLI; magics masked without shifting positions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import libcst
import pytest

from torchlint.engine import select_rules
from torchlint.notebook import code_cells, lint_notebook, mask_magics

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "notebooks" / "training.ipynb"
VIEW = "y = x.transpose(0, 1).view(-1)\n"


def torchlint(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "torchlint", "--no-cache", *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, env=env, timeout=120)


def notebook(*cells, as_lists=True) -> str:
    def cell(kind, source):
        data = {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True) if as_lists else source}
        if kind == "code":
            data.update(execution_count=None, outputs=[])
        return data

    return json.dumps({"cells": [cell(k, s) for k, s in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5},
                      indent=1)


def same_shape(a: str, b: str) -> bool:
    return [len(line) for line in a.splitlines(True)] == [len(line) for line in b.splitlines(True)]


# --- masking ---------------------------------------------------------------------------------

MAGICS = [
    "%matplotlib inline\n",
    "%load_ext autoreload\n",
    "!pip install -q torch\n",
    "!!ls\n",
    "files = !ls data\n",
    "t = %timeit -o f()\n",
    "a, b = !echo 1 2\n",
    "torch.randn?\n",
    "torch.nn.Linear??\n",
    "?torch.randn\n",
    "??x\n",
    "x?\n",
    "%x\n",
    "!l\n",
    "?\n",
    "!echo \"it's\" \\\n  continued\n",
    "for i in range(3):\n    %time f(i)\n",
    "if True:\n    !ls\n",
    "/print 1 2\n",
    ",print a b\n",
    ";print a b\n",
]


@pytest.mark.parametrize("source", MAGICS)
def test_masked_magics_parse_and_keep_every_line_length(source):
    masked = mask_magics(source)
    assert masked != source
    assert same_shape(source, masked)
    libcst.parse_module(masked)


def test_magic_position_rows_and_columns_of_other_lines_unchanged():
    source = "%time warm()\nfiles = !ls\n" + VIEW + "!echo done\n"
    masked = mask_magics(source)
    assert masked.splitlines()[2] == VIEW.rstrip("\n")


@pytest.mark.parametrize("source", [
    's = """\n%s is not a magic?\n!neither\n"""\n',
    "x = (1,\n     %2)\n" if False else "x = [1,\n     2]\n",
    "a %= 3\n",
    "b = a % 3\n",
    "c = a != 3\n",
    "# what? %magic in a comment\n",
    "d = 'why?'\n",
    "e = f(x,\n      y)  # ok?\n",
])
def test_python_is_left_alone(source):
    assert mask_magics(source) == source


def test_python_cell_magic_body_is_linted_other_cell_magics_are_not():
    assert mask_magics("%%time\n" + VIEW) == "#%time\n" + VIEW
    assert mask_magics("\n%%timeit -n 3\n" + VIEW).endswith(VIEW)
    bash = "%%bash\necho 'x.transpose(0, 1).view(-1)'\n  ls\n"
    masked = mask_magics(bash)
    assert same_shape(bash, masked) and all(line.lstrip().startswith("#") for line in masked.splitlines())
    assert mask_magics("%%writefile m.py\n" + VIEW).splitlines()[1].startswith("#")


# --- linting ---------------------------------------------------------------------------------

def test_shipped_fixture_notebook_through_the_cli():
    result = torchlint("--output-format", "json", FIXTURE)
    assert result.returncode == 1, result.stderr
    items = json.loads(result.stdout)
    # cell 3 (%%time body) is flagged; the %%bash cell, the magics and the masked `%time` line are not
    assert [(i["code"], i["cell"], i["location"]["row"], i["location"]["column"]) for i in items] == [
        ("TL004", 3, 3, 23)
    ]
    cells = json.loads(FIXTURE.read_text())["cells"]
    line = "".join(cells[2]["source"]).splitlines()[2]
    assert line[23 - 1:].startswith("view")


def test_concise_and_sarif_carry_the_cell(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(("markdown", "# Title"), ("code", "import torch\n"), ("code", "!ls\n" + VIEW)))
    concise = torchlint(path, cwd=tmp_path)
    assert concise.returncode == 1
    assert concise.stdout.splitlines()[0].startswith(f"{path}:cell 3:2:23: TL004")
    sarif = json.loads(torchlint("--output-format", "sarif", path, cwd=tmp_path).stdout)
    result = sarif["runs"][0]["results"][0]
    assert result["properties"]["cell"] == 3
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 2


def test_string_source_and_list_source_agree(tmp_path):
    a, b = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    a.write_text(notebook(("code", "%time 1\n" + VIEW)))
    b.write_text(notebook(("code", "%time 1\n" + VIEW), as_lists=False))
    rules = select_rules()
    strip = lambda r: [(f.code, f.cell, f.start, f.end) for f in r.findings]  # noqa: E731
    assert strip(lint_notebook("a", a.read_bytes(), rules)) == strip(lint_notebook("b", b.read_bytes(), rules)) != []


def test_notebook_with_only_markdown_gives_nothing(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(("markdown", VIEW), ("raw", VIEW)))
    result = torchlint("--output-format", "json", path)
    assert result.returncode == 0 and json.loads(result.stdout) == []


@pytest.mark.parametrize("content, reason", [
    ("{ not json", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"metadata": {}}', "no `cells` list"),
    ('{"worksheets": [], "nbformat": 3}', "nbformat 3"),
    ('{"cells": [{"cell_type": "code", "source": 7}]}', "cell 1 has a source that is not text"),
    ('{"cells": ["x"]}', "cell 1 is not a JSON object"),
])
def test_malformed_notebook_one_tl905(tmp_path, content, reason):
    path = tmp_path / "broken.ipynb"
    path.write_text(content)
    result = torchlint("--output-format", "json", path)
    items = json.loads(result.stdout)
    assert [i["code"] for i in items] == ["TL905"], items
    assert reason in items[0]["message"] and "not a valid notebook" in items[0]["message"]
    assert result.returncode == 1


def test_broken_notebook_next_to_good_one_in_every_format(tmp_path):
    (tmp_path / "broken.ipynb").write_bytes(b'{"cells": [')
    (tmp_path / "good.ipynb").write_text(notebook(("code", VIEW)))
    for fmt, needle in [("concise", "broken.ipynb:1:1: TL905"), ("grouped", "TL905"), ("json-lines", '"TL905"'),
                        ("github", "::error file="), ("sarif", '"TL905"')]:
        result = torchlint("--output-format", fmt, tmp_path)
        assert needle in result.stdout and "TL004" in result.stdout, (fmt, result.stdout)


def test_cell_that_does_not_parse_does_not_hide_the_others(tmp_path):
    data = notebook(("code", "def f(:\n"), ("code", VIEW)).encode()
    findings = lint_notebook("nb.ipynb", data, select_rules()).findings
    assert sorted((f.code, f.cell) for f in findings) == [("TL004", 2), ("TL901", 1)]


def test_code_cells_numbers_count_every_cell():
    data = notebook(("markdown", "a"), ("code", "b\n"), ("raw", "c"), ("code", "d\n")).encode()
    assert code_cells(data) == [(2, "b\n"), (4, "d\n")]


def test_notebook_with_bom_and_empty_cells():
    data = b"\xef\xbb\xbf" + notebook(("code", ""), ("code", VIEW)).encode()
    assert [(f.code, f.cell) for f in lint_notebook("nb.ipynb", data, select_rules()).findings] == [("TL004", 2)]


# --- the cells as one module --------------------------------------------------------------------

SPLIT_TRAINING = (
    ("markdown", "# Training"),
    ("code", "import torch\nimport torch.nn as nn\n"),
    ("code", "model = nn.Linear(4, 2)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)"),
    ("code", "%%time\nfor x, y in [(torch.randn(8, 4), torch.randn(8, 2))] * 3:\n"
             "    loss = ((model(x) - y) ** 2).mean()\n    loss.backward()\n    optimizer.step()\n"),
)


def test_an_import_from_another_cell_is_known():
    model = ("code", "class Tower(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                     "        self.layers = [nn.Linear(2, 2) for _ in range(3)]\n")
    data = notebook(("code", "import torch.nn as nn\n"), ("markdown", "## Model"), model).encode()
    findings = lint_notebook("nb.ipynb", data, select_rules()).findings
    assert [(f.code, f.cell, f.start.row, f.start.column, f.fix is not None) for f in findings] == [("TL101", 3, 4, 23, True)]
    # alone, the cell cannot tell that `nn` is torch.nn
    assert lint_notebook("nb.ipynb", notebook(model).encode(), select_rules()).findings == []


def test_fix_across_cells_edits_only_the_cell_it_fixes(tmp_path):
    from torchlint.fixer import fix_data

    data = notebook(*SPLIT_TRAINING).encode()
    fixed = fix_data("nb.ipynb", data, select_rules(["TL002"]), unsafe=True)
    assert fixed.fixed["TL002"] == 1 and [label for label, _, _ in fixed.texts] == ["nb.ipynb:cell 4"]
    before, after = json.loads(data)["cells"], json.loads(fixed.new)["cells"]
    assert [c["source"] for c in before[:3]] == [c["source"] for c in after[:3]]  # no marker leaks
    assert "".join(after[3]["source"]).startswith("%%time\n")
    assert "optimizer.zero_grad()" in "".join(after[3]["source"])
    assert "torchlint-cell" not in fixed.new.decode()
    again = fix_data("nb.ipynb", fixed.new, select_rules(["TL002"]), unsafe=True)
    assert again.new == fixed.new and not again.fixed
    # a cell without a final newline keeps it that way
    assert not "".join(after[2]["source"]).endswith("\n")


def test_a_statement_split_over_two_cells_lints_them_one_by_one():
    data = notebook(("code", "for i in range(3):\n"), ("code", "    print(i)\n"), ("code", VIEW)).encode()
    findings = lint_notebook("nb.ipynb", data, select_rules()).findings
    # The second cell alone is valid as IPython runs it (the common indentation stripped, issue 40).
    assert sorted((f.code, f.cell) for f in findings) == [("TL004", 3), ("TL901", 1)]


def test_top_level_await_and_a_file_noqa_in_a_cell():
    data = notebook(("code", "await asyncio.sleep(0)\n"), ("code", VIEW)).encode()
    assert [(f.code, f.cell) for f in lint_notebook("nb.ipynb", data, select_rules()).findings] == [("TL004", 2)]
    quiet = notebook(("code", "# torchlint: noqa\n"), ("code", VIEW)).encode()
    assert lint_notebook("nb.ipynb", quiet, select_rules()).findings == []


def test_joined_masked_text_is_the_mask_of_the_joined_text():
    from torchlint.notebook import join_cells

    cells = code_cells(notebook(*SPLIT_TRAINING, ("code", "!ls\nx?\n%time f()"), ("code", "%%bash\nls\n")).encode())
    joined = join_cells(cells)
    assert joined is not None and joined.masked == joined.mask(joined.text)
