"""`torchlint run [OPTIONS] SCRIPT [ARGS...]` and `torchlint run [OPTIONS] -m MODULE [ARGS...]`.

Lints the script and the files it imports from its own project (no torch yet), then imports torch,
installs the instrumentation and runs the script in this process as `python SCRIPT ARGS` would,
stops it after --max-steps optimizer steps (or at its end), and reports: the runtime findings at
the user's lines with their evidence, each static finding as CONFIRMED / NOT REACHED / RAN WITHOUT
HARM, the gradient health and the memory per step.

Exit status: 1 when anything was confirmed or found by the run, 2 when the script failed for a
reason of its own (its traceback, trimmed to the user's frames, is shown), exited with a non-zero
status, or torchlint's instrumentation failed; 0 otherwise; 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
import time
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130
CURVE_STEPS = 200  # with --html, gradient norms are kept for the curves up to this step
NO_TORCH = "torchlint run needs torch: pip install 'torchlint[verify]'"

DESCRIPTION = """\
Run a training script under instrumentation and confirm torchlint's findings on it.

Unlike plain `torchlint`, which never imports torch and never executes anything, `torchlint run`
EXECUTES the script (in this process, as `python SCRIPT ARGS` would: same sys.argv, __main__,
sys.path[0]) because you asked it to. It first lints the script and the files it imports from
its own project, then watches the run through PyTorch's public hooks (module forward hooks,
optimizer step hooks, a TorchFunctionMode, saved-tensor hooks, warnings), stops after
--max-steps optimizer steps, and reports each runtime finding at your line with its evidence,
each static finding as CONFIRMED / NOT REACHED / RAN WITHOUT HARM, a gradient-health table and
the memory per step.

Exit status: 0 nothing confirmed; 1 a finding was confirmed or found by the run; 2 the script
failed for an unrelated reason (traceback trimmed to your frames), exited non-zero, or a usage
error; 130 interrupted."""


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        raise UsageError(message)


# Options that take a value: the command line is split at the script (or `-m MODULE`), and every
# argument after it belongs to the script, so the split has to know which options eat the next one.
_VALUE_OPTIONS = {"--max-steps", "--health-steps", "--vanishing", "--exploding", "--output-format", "-o",
                  "--output-file", "--select", "--ignore", "--project-root", "--config", "--saved-tensors-every", "--html"}


def build_parser() -> argparse.ArgumentParser:
    from torchlint.output import FORMATS

    parser = _Parser(prog="torchlint run", usage="torchlint run [OPTIONS] SCRIPT [ARGS...] | "
                     "torchlint run [OPTIONS] -m MODULE [ARGS...]", description=DESCRIPTION,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-steps", type=int, default=20, metavar="N",
                        help="stop after the N-th step of any optimizer (default 20; 0: run to the end)")
    parser.add_argument("--health-steps", type=int, default=5, metavar="N",
                        help="gradient health after each of the first N steps (default 5)")
    parser.add_argument("--vanishing", type=float, default=1e-7, metavar="NORM",
                        help="a gradient norm below this is vanishing (default 1e-7)")
    parser.add_argument("--exploding", type=float, default=1e3, metavar="NORM",
                        help="a gradient norm above this is exploding (default 1e3)")
    parser.add_argument("--output-format", choices=sorted(FORMATS), default=None,
                        help="report format (default: concise); with a machine format on stdout the script's "
                             "own output goes to stderr")
    parser.add_argument("-o", "--output-file", help="write the report to this file")
    parser.add_argument("--html", metavar="FILE",
                        help="also write the report as one self-contained HTML file (findings with their source "
                             "lines, gradient-norm curves per layer, memory per step, the shape trace of a failed "
                             "forward; no network, no external assets)")
    parser.add_argument("--select", help="comma-separated codes or prefixes to report (static and runtime)")
    parser.add_argument("--ignore", help="comma-separated codes or prefixes not to report")
    parser.add_argument("--config", help="the pyproject.toml to read [tool.torchlint] from")
    parser.add_argument("--project-root", help="the directory whose files are yours (default: the nearest "
                        "directory above the script with pyproject.toml, setup.py, setup.cfg or .git)")
    parser.add_argument("--no-lint", action="store_true", help="do not lint first (runtime findings only)")
    parser.add_argument("--no-saved-tensors", action="store_true",
                        help="do not install saved-tensor hooks (no saved-tensor bytes; slightly faster)")
    parser.add_argument("--saved-tensors-every", type=int, default=None, metavar="N",
                        help="saved-tensor hooks on in one step of N only (steps 1, 1+N, ...; default: 1, or more "
                             "when step 2 shows they would cost over 10%% of a step, as on recurrent models that save "
                             "thousands of small tensors a step); the memory samples count those steps' graphs")
    parser.add_argument("--find-holders", action="store_true",
                        help="name containers of retained losses by scanning the heap (gc.get_referrers) when "
                             "the user's frames do not show them (slow on big programs)")
    parser.add_argument("--anomaly", action="store_true",
                        help="run with torch.autograd.set_detect_anomaly(True) (slow)")
    return parser


def split_argv(argv: Sequence[str]) -> Tuple[List[str], Optional[str], Optional[str], List[str]]:
    """(torchlint's options, SCRIPT, MODULE, the script's arguments)."""
    options: List[str] = []
    index = 0
    argv = list(argv)
    while index < len(argv):
        item = argv[index]
        if item == "-m":
            if index + 1 >= len(argv):
                raise UsageError("-m needs a module name")
            return options, None, argv[index + 1], argv[index + 2:]
        if item == "--":
            if index + 1 >= len(argv):
                raise UsageError("no script given")
            return options, argv[index + 1], None, argv[index + 2:]
        if item.startswith("-") and item != "-":
            options.append(item)
            if item in _VALUE_OPTIONS:
                if index + 1 >= len(argv):
                    raise UsageError(f"{item} needs a value")
                options.append(argv[index + 1])
                index += 1
            index += 1
            continue
        return options, item, None, argv[index + 1:]
    return options, None, None, []


def _codes(value: Optional[str]) -> List[str]:
    return [c.strip().upper() for c in (value or "").split(",") if c.strip()]


def main(argv: Sequence[str]) -> int:
    try:
        options, script, module, script_args = split_argv(argv)
        parser = build_parser()
        if "-h" in options or "--help" in options:
            parser.print_help()
            return EXIT_CLEAN
        args = parser.parse_args(options)
        if script is None and module is None:
            raise UsageError("no script given (torchlint run SCRIPT [ARGS...] or torchlint run -m MODULE)")
        if args.max_steps < 0 or args.health_steps < 0:
            raise UsageError("--max-steps and --health-steps must be 0 or more")
        if args.saved_tensors_every is not None and args.saved_tensors_every < 1:
            raise UsageError("--saved-tensors-every must be 1 or more")
    except UsageError as error:
        sys.stderr.write(f"torchlint run: error: {error}\n")
        return EXIT_ERROR
    if importlib.util.find_spec("torch") is None:
        sys.stderr.write(NO_TORCH + "\n")
        return EXIT_ERROR
    from torchlint.runtime.launcher import TargetError, module_target, script_target

    try:
        target = module_target(module, script_args) if module else script_target(script, script_args)
    except TargetError as error:
        sys.stderr.write(f"torchlint run: {error}\n")
        return EXIT_ERROR
    return Run(args, target).execute()


class Run:
    def __init__(self, args: argparse.Namespace, target) -> None:
        self.args = args
        self.target = target

    def execute(self) -> int:
        from torchlint.runtime.project import Project, find_project_root
        from torchlint.runtime.reach import Reach

        args = self.args
        from torchlint.runtime.project import set_display_root

        root = os.path.abspath(args.project_root) if args.project_root else find_project_root(self.target.path)
        project = Project(root)
        set_display_root(root)
        try:
            statics, problems, select, ignore = self._lint_beside_torch(project)
        except Exception as error:  # noqa: BLE001 - a config error: the run would not mean much either
            sys.stderr.write(f"torchlint run: {error}\n")
            return EXIT_ERROR
        reach = Reach()
        by_file: dict = {}
        for static in statics:
            by_file.setdefault(static.path, []).append(static.line)
        for path, lines in by_file.items():
            reach.want(path, lines)
        machine = (args.output_format or "concise") not in ("concise", "full", "grouped")
        self._context = (statics, problems, reach, select, ignore, root)
        with _script_output(to_stderr=machine and not args.output_file) as restore_output:
            self._restore_output = restore_output
            outcome, session, loaded = self._run(project, reach)
        return self._report(outcome, session, statics, problems, reach, loaded, select, ignore, root)

    # -- static ---------------------------------------------------------------------------------------
    def _lint_beside_torch(self, project):
        """The lint (LibCST's import and the parse: most of torchlint run's fixed cost) runs in a
        forked child while this process imports torch, where fork is available; the results come
        back pickled. Before torch is imported there are no threads, so forking is safe."""
        if self.args.no_lint or not hasattr(os, "fork") or "torch" in sys.modules:
            return self._lint(project)
        import pickle

        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return self._lint(project)
        if pid == 0:  # the child: lint, send, and leave without running any cleanup of the parent's
            os.close(read_end)
            code = 0
            try:
                try:
                    payload = pickle.dumps(("ok", self._lint(project)))
                except BaseException as error:  # noqa: BLE001 - sent to the parent, which reports it
                    payload = pickle.dumps(("error", str(error)))
                with os.fdopen(write_end, "wb") as handle:
                    handle.write(payload)
            except BaseException:  # noqa: BLE001
                code = 1
            finally:
                os._exit(code)
        os.close(write_end)
        with _own_imports():
            import warnings

            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            try:
                import torch  # noqa: F401 - imported while the child lints
            except Exception:  # noqa: BLE001 - the run reports it when it imports torch itself
                pass
        with os.fdopen(read_end, "rb") as handle:
            payload = handle.read()
        os.waitpid(pid, 0)
        try:
            kind, value = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - the child died: lint here instead
            return self._lint(project)
        if kind == "error":
            raise RuntimeError(value)
        return value

    def _lint(self, project):
        from torchlint.runtime.project import import_roots, imported_project_files
        from torchlint.runtime.reconcile import StaticFinding

        args = self.args
        select, ignore = _codes(args.select), _codes(args.ignore)
        if args.no_lint:
            return [], [], select, ignore
        from pathlib import Path

        from torchlint.config import ConfigError, load_config, validate_codes
        from torchlint.runner import lint_file
        from torchlint.runtime.project import display_path

        try:
            config = load_config(Path(os.path.dirname(self.target.path)), Path(args.config) if args.config else None)
        except ConfigError as error:
            raise RuntimeError(f"config error: {error}") from None
        for codes, option in ((select, "--select"), (ignore, "--ignore")):
            if codes:
                try:
                    validate_codes([c for c in codes if not _runtime_only(c)], option)
                except ConfigError as error:
                    raise RuntimeError(str(error)) from None
        lint_select = select or config.effective_select
        lint_ignore = list(config.ignore) + ignore
        files = imported_project_files(self.target.path, import_roots([self.target.path0], project), project)
        statics, problems = [], []
        for path in files:
            shown = display_path(path)
            result = lint_file(path if shown.startswith(os.pardir) or not os.path.exists(shown) else shown,
                               config, lint_select, lint_ignore)
            for finding in result.findings:
                if finding.is_diagnostic:
                    problems.append(f"{shown}:{finding.start.row}: {finding.code} {finding.message}")
                else:
                    statics.append(StaticFinding(path, finding))
        return statics, problems, select or config.effective_select, lint_ignore

    # -- the run ----------------------------------------------------------------------------------------
    def _run(self, project, reach):
        import warnings

        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")  # torch's import, not the script
        from torchlint.runtime import launcher

        with _own_imports():
            from torchlint.runtime.session import Options, Session  # imports torch

        args = self.args
        options = Options(max_steps=args.max_steps, health_steps=args.health_steps, vanishing=args.vanishing,
                          exploding=args.exploding, find_holders=args.find_holders,
                          saved_tensors=not args.no_saved_tensors, saved_tensors_every=args.saved_tensors_every,
                          curve_steps=min(args.max_steps or CURVE_STEPS, CURVE_STEPS) if args.html else 0)
        session = Session(options, project.is_user_file)
        if args.anomaly:
            import torch

            torch.autograd.set_detect_anomaly(True)
        import gc

        from torchlint.runtime.interrupt import Interrupts

        gc.collect()
        # What exists now (torch's and torchlint's modules) lives to the end: the script's full
        # collections need not scan it again and again (the hooks allocate per saved tensor).
        gc.freeze()
        interrupts = Interrupts(boundary_code=launcher.run.__code__)
        children = _children_started()
        self._started = time.perf_counter()
        self._live = (session, reach, interrupts, children)
        session.on_runaway = self._runaway
        reach.install()
        session.install()
        interrupts.install()
        try:
            outcome = launcher.run(self.target, reach.compile, lambda: session.stop_reason)
        finally:
            interrupts.uninstall()
            session.uninstall()
            reach.uninstall()
        if session.stopping and outcome.kind != launcher.STOPPED:
            session.stop_caught = max(session.stop_caught, 1)  # the StopRun never reached the launcher
            if outcome.kind == launcher.FINISHED:  # the script caught the stop and then ended by itself
                outcome = launcher.Outcome(launcher.STOPPED, outcome.seconds, session.stop_reason,
                                           namespace=outcome.namespace)
        return self._after_run(outcome, session, children)

    def _after_run(self, outcome, session, children):
        from torchlint.runtime import launcher

        session.set_main_namespace(outcome.namespace)
        if outcome.kind == launcher.FAILED and outcome.error is not None:
            outcome.classified = session.failures.classify(outcome.error)
        session.finish(script_ended=outcome.kind in (launcher.FINISHED, launcher.EXITED))
        session.notes.extend(_watch_notes(session, outcome, _children_started() - children, self.args.max_steps))
        loaded = {os.path.abspath(m.__file__) for m in list(sys.modules.values())
                  if isinstance(getattr(m, "__file__", None), str)}
        loaded.add(self.target.path)
        return outcome, session, loaded

    def _runaway(self) -> None:
        """The script caught torchlint's stop again and again (a bare `except:` around the step):
        write the report now and end the process, as the stop would have."""
        from torchlint.runtime import launcher

        session, reach, interrupts, children = self._live
        interrupts.uninstall()
        session.uninstall(ending_process=True)
        reach.uninstall()
        self._ending_process = True
        main = sys.modules.get("__main__")
        outcome = launcher.Outcome(launcher.STOPPED, time.perf_counter() - self._started, session.stop_reason,
                                   namespace=getattr(main, "__dict__", None))
        code = EXIT_ERROR
        try:
            outcome, session, loaded = self._after_run(outcome, session, children)
            self._restore_output()
            code = self._report(outcome, session, *self._context[:3], loaded, *self._context[3:])
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)

    # -- the report --------------------------------------------------------------------------------------
    def _report(self, outcome, session, statics, problems, reach, loaded, select, ignore, root) -> int:
        from torchlint.runtime import launcher
        from torchlint.runtime.reconcile import reconcile
        from torchlint.runtime.report import WRITERS, RunReport, clean_report

        args = self.args
        observations = [o for o in session.observations.all() if _selected(o.code, select, ignore)]
        results = reconcile(statics, observations, lambda path, line: reach.reached(path, line, loaded),
                            unfinished=_unfinished(session, outcome), unobservable=session.unobservable)
        classified = outcome.classified
        traceback_text = None
        quoted: Tuple[str, ...] = ()
        if outcome.kind == launcher.FAILED and outcome.error is not None:
            traceback_text = session.frames.trimmed_traceback(outcome.error)
            quoted = _error_quoted(outcome.error)
        exit_code = EXIT_FINDINGS if any(r.harmful for r in results) else EXIT_CLEAN
        if outcome.kind == launcher.FAILED and not classified:
            exit_code = EXIT_ERROR
        elif outcome.kind == launcher.EXITED:
            exit_code = EXIT_ERROR
        elif outcome.kind == launcher.INTERRUPTED:
            exit_code = EXIT_INTERRUPTED
        if session.internal_error_count and exit_code == EXIT_CLEAN:
            exit_code = EXIT_ERROR
        growth = session.memory.growth()
        reported = {id(r.observation) for r in results if r.observation is not None}
        explained = sorted({f"{o.code} at {o.where}" for o in observations
                            if o.code in ("TL003", "TL006", "TL106") and id(o) in reported})
        reason = outcome.reason
        if session.stop_caught:
            reason += (f"; the script caught torchlint's stop {session.stop_caught} time"
                       f"{'s' if session.stop_caught != 1 else ''} (a bare `except:` or `except BaseException:`)")
            if getattr(self, "_ending_process", False):
                reason += " and trained on, so torchlint wrote this report and ended the process"
        if outcome.kind == launcher.FAILED:
            reason = ("stopped by a known rule's error" if classified else "the script failed") + f": {reason}"
        report = RunReport(
            target=self.target.name, outcome=outcome.kind, reason=reason, seconds=outcome.seconds,
            steps=session.total_steps(), results=results, health=session.gradients.health_rows(),
            health_steps=session.gradients.health_steps_seen, samples=session.memory.samples,
            growth=session.memory.describe_growth(growth) if growth else None, growth_explained_by=explained,
            traceback=traceback_text, exit_code=exit_code, internal_errors=session.internal_errors,
            notes=problems + session.notes, thresholds={"vanishing": args.vanishing, "exploding": args.exploding},
            uses_cuda=_cuda_used(), environment=_environment(), saved_tensors_every=session.memory.every,
            error_quoted=quoted, frozen=sorted(session.gradients.frozen.values()),
            shape_trace=session.shape_trace())
        name = args.output_format or os.environ.get("TORCHLINT_OUTPUT_FORMAT") or "concise"
        options = {"format": name, "root": root}
        text = name in ("concise", "full", "grouped")
        if not (text and not args.output_file and _terminal(sys.stdout)):
            clean_report(report)  # escape codes only where a terminal reads them
        if args.output_file:
            import io

            buffer = io.StringIO()
            WRITERS[name](report, buffer, options)
            try:
                with open(args.output_file, "w", encoding="utf-8") as handle:
                    handle.write(buffer.getvalue())
            except OSError as error:
                sys.stderr.write(f"torchlint run: cannot write {args.output_file}: {error}\n")
                return EXIT_ERROR
        else:
            sys.stdout.flush()
            WRITERS[name](report, sys.stdout, options)
            sys.stdout.flush()
        if args.html:
            from torchlint.runtime.html import write_html

            clean_report(report)
            try:
                with open(args.html, "w", encoding="utf-8") as handle:
                    write_html(report, handle, options)
            except OSError as error:
                sys.stderr.write(f"torchlint run: cannot write {args.html}: {error}\n")
                return EXIT_ERROR
        return exit_code


def _error_quoted(error: BaseException) -> Tuple[str, ...]:
    """How a finding's evidence quotes the error that ended the run (detectors/failures.py), the
    longest first: `IndexError: <its first sentence>`, then the sentence alone."""
    from torchlint.runtime.detectors.failures import _first_sentence

    sentence = _first_sentence(error)
    if len(sentence) < 12:  # too short to be told from the rest of the evidence
        return ()
    return (f"{type(error).__name__}: {sentence}", sentence)


def _terminal(stream) -> bool:
    """Whether a person reads `stream` on a terminal (NO_COLOR asks for plain text there too)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _runtime_only(code: str) -> bool:
    from torchlint.runtime.signatures import CODES

    return code in CODES and not _registered(code)


def _registered(code: str) -> bool:
    from torchlint.rule_codes import known_rule_codes

    return any(c.startswith(code) for c in known_rule_codes())


def _selected(code: str, select: Sequence[str], ignore: Sequence[str]) -> bool:
    chosen = tuple(("TL" if c == "ALL" else c) for c in select) or ("TL",)
    return code.startswith(chosen) and not (ignore and code.startswith(tuple(ignore)))


def _environment() -> dict:
    import platform

    torch = sys.modules.get("torch")
    return {"python": platform.python_version(), "torch": getattr(torch, "__version__", None),
            "cuda_available": bool(torch is not None and torch.cuda.is_available())}


def _cuda_used() -> bool:
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized())


@contextlib.contextmanager
def _own_imports() -> Iterator[None]:
    """torchlint's own imports (torch) must not find a `torch.py` in the working directory, which
    `python -m torchlint` puts first on sys.path."""
    saved = sys.path[:]
    cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", cwd)]
    try:
        yield
    finally:
        sys.path[:] = saved


@contextlib.contextmanager
def _script_output(to_stderr: bool) -> Iterator[Callable[[], None]]:
    """With a machine-readable report on stdout, the script's own output goes to stderr. Yields
    the function that puts stdout back (also called when the report is written early)."""
    if not to_stderr:
        yield lambda: None
        return
    sys.stdout.flush()
    saved = [os.dup(1)]
    os.dup2(2, 1)

    def restore() -> None:
        if saved:
            sys.stdout.flush()
            fd = saved.pop()
            os.dup2(fd, 1)
            os.close(fd)

    try:
        yield restore
    finally:
        restore()


def _unfinished(session, outcome) -> dict:
    """(path, line) -> what ended the run, for the user's lines on the stack of the exception that
    ended it: their statements started but never completed."""
    error = outcome.error
    if error is None or outcome.kind not in ("failed", "interrupted"):  # a stop comes after the step's update
        return {}
    from torchlint.runtime.frames import _walk

    what = type(error).__name__
    found = {}
    for tb in _walk(error.__traceback__):
        filename = tb.tb_frame.f_code.co_filename
        if session.frames.is_user_file(filename):
            found[(os.path.abspath(filename), tb.tb_lineno)] = what
    return found


def _children_started() -> int:
    """Processes created through multiprocessing so far (fork or spawn; torch.multiprocessing and
    DataLoader workers included): the value of its process counter, read, never changed."""
    process = sys.modules.get("multiprocessing.process")
    counter = getattr(process, "_process_counter", None)
    if counter is None:
        return 0
    text = repr(counter)  # "count(3)": the next number it hands out
    try:
        return int(text[text.index("(") + 1:text.index(")")].split(",")[0]) - 1
    except ValueError:
        return 0


def _watch_notes(session, outcome, children: int, max_steps: int) -> List[str]:
    """What the run could not watch, when no training step was seen."""
    from torchlint.runtime import launcher

    notes = []
    if session.manual.steps:
        notes.append(f"{session.manual.steps} step{'s' if session.manual.steps != 1 else ''} were hand-written "
                     "updates (no torch.optim optimizer): counted for --max-steps and the memory samples; no "
                     "gradient-health table for them")
    if session.total_steps() or outcome.kind in (launcher.FAILED, launcher.INTERRUPTED) or \
            not (session.backwards or children):
        return notes
    limit = f"--max-steps {max_steps} did not apply" if max_steps else "nothing was counted"
    if children > 0:
        notes.append(f"no training step ran in this process, and the script started {children} child "
                     f"process{'es' if children != 1 else ''} (multiprocessing / torch.multiprocessing): "
                     f"training in a child process (hogwild, spawn) is not watched, and {limit}")
    else:
        notes.append("no optimizer step and no hand-written update of the parameters between two backwards "
                     f"was seen, so {limit}")
    return notes
