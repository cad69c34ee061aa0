"""`torchlint shapes FILE`: a static, torchinfo-like table of each model's layers with their
input and output shapes, for the input the code implies (or `--input 3,32,32`). Nothing runs: the
shapes come from the same analysis the shape rules use.

    torchlint shapes train.py
    torchlint shapes model.py --input 3,32,32      # per-sample size; the batch is N
    torchlint shapes model.py --model Net --input 1,28,28
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence

EXIT_OK, EXIT_PROBLEMS, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint shapes",
        description="Print each model's layers with their input and output shapes, without running anything.")
    parser.add_argument("path", help="a Python file")
    parser.add_argument("--input", help="the per-sample input size, comma-separated (3,32,32); the batch is N")
    parser.add_argument("--model", help="only this model class (or the variable holding the model)")
    return parser


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    sample = None
    if args.input:
        try:
            sample = tuple(int(part) for part in args.input.replace("x", ",").split(",") if part.strip())
        except ValueError:
            sys.stderr.write(f"torchlint shapes: error: --input takes sizes like 3,32,32, not {args.input!r}\n")
            return EXIT_ERROR
    try:
        text = _read(args.path)
    except (OSError, UnicodeDecodeError, ValueError) as error:
        sys.stderr.write(f"torchlint shapes: error: cannot read {args.path}: {error}\n")
        return EXIT_ERROR
    from torchlint import parsing
    from torchlint.analysis import project
    from torchlint.analysis.semantic import Semantic

    try:
        module = parsing.parse_module(text)
    except Exception as error:  # a file that does not parse: one line, no traceback
        sys.stderr.write(f"torchlint shapes: error: cannot parse {args.path}: {str(error).splitlines()[0]}\n")
        return EXIT_ERROR
    semantic = Semantic(module, path=args.path, project=project.for_file(args.path, module))
    runs = _runs(semantic, sample, args.model)
    if not runs:
        sys.stdout.write(f"{args.path}: no model whose input size the code fixes"
                         f"{'' if sample else ' (give one with --input 3,32,32)'}\n")
        return EXIT_OK
    problems = 0
    for run in runs:
        problems += _print_run(semantic, run)
    return EXIT_PROBLEMS if problems else EXIT_OK


def _read(path: str) -> str:
    """A script's text, or a notebook's code cells joined as the linter lints them (line numbers
    then count in the joined cells, each after a `# torchlint-cell N` marker line)."""
    if not path.endswith(".ipynb"):
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    from torchlint import notebook

    with open(path, "rb") as handle:
        data = handle.read()
    try:
        cells = notebook.code_cells(data)
    except notebook.NotebookError as error:
        raise ValueError(f"not a valid notebook: {error}") from None
    joined = notebook.join_cells(cells, skip_incomplete=True)
    if joined is None:
        raise ValueError("no cell of the notebook is complete Python")
    return joined.masked


def _runs(semantic, sample: Optional[tuple], only: Optional[str]):
    from torchlint.analysis.tensor_shape.facts import ModelRun, shape_facts
    from torchlint.analysis.tensor_shape.inputs import Source
    from torchlint.analysis.tensor_shape.modules import Interpreter, Submodule, bind_constructor, method
    from torchlint.analysis.tensor_shape.values import Tensor

    if sample is None:
        found, seen = [], set()
        for run in shape_facts(semantic).runs:
            key = (run.label, run.source.split(" (line")[0])
            if run.source == "symbolic" or key in seen or (only and run.label != only):
                continue
            seen.add(key)
            found.append(run)
        return found
    found = []
    for klass in sorted(semantic.module_classes(), key=lambda k: semantic.index.order.get(k, 0)):
        if (only and klass.name.value != only) or method(klass, "forward") is None:
            continue
        arguments = bind_constructor(semantic, klass, semantic, None, {})
        source = Source(sample, f"--input {'×'.join(map(str, sample))}")
        interpreter = Interpreter()
        output = interpreter.call_module(Submodule(klass, semantic, arguments, klass, ""), [Tensor(source.shape)],
                                         klass, semantic, 0, True)
        found.append(ModelRun(klass.name.value, source, source.shape, interpreter.run.steps, output,
                              interpreter.run.problems, klass))
    return found


def _print_run(semantic, run) -> int:
    from torchlint.analysis.tensor_shape import dims as D
    from torchlint.analysis.tensor_shape.inputs import line_of
    from torchlint.analysis.tensor_shape.values import Tensor, Tup

    rows: List[tuple] = []
    for step in run.steps:
        line = line_of(step.semantic, step.node) if step.semantic is semantic else None
        where = f"{line}" if line else (semantic.elsewhere(step.node) or "")
        rows.append(("  " * max(0, step.depth - 1) + step.label, D.shape_text(step.before), D.shape_text(step.after), where))
    out = sys.stdout
    out.write(f"{run.label}  (input {D.shape_text(run.input_shape)} from {run.source})\n")
    headers = ("layer", "input", "output", "line")
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out.write("  " + "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip() + "\n")
    out.write("  " + "  ".join("-" * w for w in widths) + "\n")
    for row in rows:
        out.write("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
    output = run.output
    if isinstance(output, Tup) and output.items and isinstance(output.items[0], Tensor):
        output = output.items[0]
    if isinstance(output, Tensor):
        out.write(f"  output: {D.shape_text(output.shape)}\n")
    certain = [p for p in run.problems if p.certain]
    for problem in certain:
        label = f"{problem.layer}: " if problem.layer else ""
        out.write(f"  ✗ {label}{problem.text}\n")
    out.write("\n")
    return len(certain)
