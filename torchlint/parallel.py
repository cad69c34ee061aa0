"""Linting many files fast: the cache, the pre-filter and worker processes.

`lint_paths(run)` returns one FileResult per file of `run.files`, in that order, whatever the
number of workers. Per file: read the bytes; look the result up in the cache (key: content,
version, rule fingerprint, the rules enabled for that file); on a miss decode the text and, when
no enabled rule's trigger occurs in it, answer "no findings" without parsing; otherwise lint it
with the engine and store the result. Until a file actually needs parsing, neither LibCST nor
the rules are imported (a warm run reads the rule codes and triggers from the cache's manifest).

Workers are started once (a process pool, `fork` on Linux so they inherit what the parent has
imported), receive batches of paths (the biggest files first, so one huge file does not finish
last), and read, look up, lint and store on their own. Few files (< MIN_PARALLEL_FILES) or
`--jobs 1` lint in-process: starting processes would cost more than it saves. Nothing here or in
the workers imports torch.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint import diagnostics
from torchlint.finding import FileResult

MIN_PARALLEL_FILES = 8
CHUNKS_PER_WORKER = 6


def default_jobs() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


class Linter:
    """What one process needs to lint files of a run; picklable, shipped to every worker."""

    def __init__(self, config, select: Sequence[str], ignore: Sequence[str], cache_dir: Optional[str],
                 manifest=None) -> None:
        self.config = config
        self.select = tuple(select)
        self.ignore = tuple(ignore)
        self.cache_dir = cache_dir
        self.manifest = manifest  # [(code, triggers, cross_file)] or None (then the rules are imported)
        self._cache = None
        self._codes: Dict[tuple, Tuple[str, ...]] = {}
        self._rules_by_code = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_cache"] = None
        state["_rules_by_code"] = None
        return state

    # --- setup ------------------------------------------------------------------------------
    @property
    def cache(self):
        if self._cache is None and self.cache_dir is not None:
            from torchlint.cache import Cache

            self._cache = Cache(self.cache_dir)
        return self._cache

    def _all(self) -> List[Tuple[str, Tuple[str, ...], bool]]:
        if self.manifest is None:
            from torchlint.startup import import_rules

            rules = import_rules().all_rules()  # LibCST's classes from kept code, collector off
            self.manifest = [(rule.code, tuple(rule.triggers), rule.cross_file_triggers) for rule in rules]
            if self.cache is not None:
                self.cache.save_manifest(rules)
        return self.manifest

    def codes_for(self, path: str) -> Tuple[str, ...]:
        """The codes enabled for `path` (same prefix logic as engine.select_rules)."""
        ignored = tuple(self.ignore) + tuple(self.config.ignores_for(path)) if self.config else tuple(self.ignore)
        key = ignored
        codes = self._codes.get(key)
        if codes is None:
            selected = self.select or ("TL",)
            codes = tuple(
                code for code, *_ in self._all()
                if code.startswith(selected) and not (ignored and code.startswith(ignored))
            )
            self._codes[key] = codes
        return codes

    def _triggers(self, codes: Sequence[str], cross_file_only: bool = False):
        table = {code: (triggers, cross_file) for code, triggers, cross_file in self._all()}
        return [table[code][0] for code in codes if table[code][1] or not cross_file_only]

    def _rules(self, codes: Sequence[str]):
        if self._rules_by_code is None:
            import gc

            from torchlint.startup import import_rules

            # LibCST, the rules and the analysis are loaded for good: their import keeps their
            # objects out of every later garbage collection (each parse allocates enough to
            # trigger many).
            self._rules_by_code = {rule.code: rule for rule in import_rules().all_rules()}
            # Nearly everything a lint allocates dies by reference counting; what the collector
            # would scan, again and again, is the live parse trees (the file's, and the project
            # files kept for the files that import them): 15-20% of a cold run. Collect only
            # when enough has piled up (see _collect_if_needed).
            gc.disable()
        return [self._rules_by_code[code] for code in codes if code in self._rules_by_code]

    # --- one file ---------------------------------------------------------------------------
    def lint(self, path: str) -> FileResult:
        try:
            return self._lint(path)
        except RecursionError:
            return diagnostics.failure(path, diagnostics.TOO_COMPLEX, "nesting too deep to analyse")
        except Exception as error:  # never let one file end the run with a traceback
            return diagnostics.failure(
                path, diagnostics.INTERNAL_ERROR,
                f"internal error: {type(error).__name__}: {error} (please report this)",
            )
        finally:
            _collect_if_needed()

    def flush(self) -> None:
        """Write the results kept for the cache since the last flush."""
        if self._cache is not None:
            self._cache.flush()

    def cached(self, path: str) -> Optional[FileResult]:
        """The stored result for `path`, or None (a miss, no cache, or any problem at all)."""
        if self.cache is None:
            return None
        try:
            with open(path, "rb") as handle:
                data = handle.read()
            notebook = path.endswith(".ipynb")
            return self.cache.get(self.cache.key(data, self.codes_for(path), "ipynb" if notebook else "py"), path)
        except Exception:
            return None

    def _lint(self, path: str) -> FileResult:
        data = _read(path)
        if isinstance(data, FileResult):
            return data
        codes = self.codes_for(path)
        notebook = path.endswith(".ipynb")
        cache = self.cache
        key = None
        if cache is not None:
            key = cache.key(data, codes, "ipynb" if notebook else "py")
            hit = cache.get(key, path)
            if hit is not None:
                return hit
        if not notebook:
            early = self._without_parse(path, data, codes)
            if early is not None:
                return early
        from torchlint.runner import lint_data

        result = lint_data(path, data, self._rules(codes))
        if cache is not None:
            cache.put(key, result)
        return result

    def _without_parse(self, path: str, data: bytes, codes: Sequence[str]) -> Optional[FileResult]:
        """The result when it needs no parse: undecodable bytes, or no trigger in the text."""
        from torchlint.prefilter import without_parse

        return without_parse(path, data, self._triggers(codes), self._triggers(codes, cross_file_only=True))


# Net container objects allocated since the last collection above which one runs: bounds what
# the few reference cycles (a file's analysis, a project file dropped from the parse cache) hold.
COLLECT_AFTER_OBJECTS = 3_000_000


def _collect_if_needed() -> None:
    import gc

    if not gc.isenabled() and gc.get_count()[0] > COLLECT_AFTER_OBJECTS:
        gc.collect()


def _read(path: str):
    """The file's bytes, or the TL900 result (same as runner.read_bytes, without importing the
    engine)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        return diagnostics.failure(path, diagnostics.UNREADABLE, f"cannot read file: {error.strerror or error}")


# --- the pool -----------------------------------------------------------------------------------
_WORKER: Optional[Linter] = None


def _init_worker(linter: Linter) -> None:
    global _WORKER
    _WORKER = linter
    # The parse path is needed by nearly every run; import it once per worker, up front.
    import torchlint.runner  # noqa: F401


def _lint_batch(batch: Sequence[Tuple[int, str]]) -> List[Tuple[int, FileResult]]:
    assert _WORKER is not None
    try:
        return [(index, _WORKER.lint(path)) for index, path in batch]
    finally:
        _WORKER.flush()  # a worker is not told when the pool ends: each batch writes its own


def _batches(files: Sequence[str], jobs: int) -> List[List[Tuple[int, str]]]:
    """Batches of (index, path) of similar total size, biggest first, each directory's files
    together where it fits: a script and the sibling modules it imports (`from model import
    Net`) are then linted by one worker, which parses each of them once (the project layer keeps
    what it parsed for the files linted after). A directory joins the group of the highest
    directory above it that has files to lint (`main.py` importing `src/model.py`; a notebook at a
    repository's root importing `going_modular/going_modular/engine.py`, with no file in
    `going_modular/` itself): a subpackage goes to the worker of the scripts above it, split
    along its directories only when the group is bigger than a batch."""
    sizes = []
    for index, path in enumerate(files):
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        sizes.append((size, index, path))
    total = sum(size for size, _, _ in sizes) or 1
    target = max(total // (jobs * CHUNKS_PER_WORKER), 1)
    directory_of = {index: os.path.dirname(os.path.abspath(path)) for _, index, path in sizes}
    with_files = set(directory_of.values())
    highest: Dict[str, Optional[str]] = {}

    def group(directory: str) -> Optional[str]:
        """The highest directory at or above `directory` with files to lint (None above them all)."""
        if directory not in highest:
            parent = os.path.dirname(directory)
            above = group(parent) if parent != directory else None
            highest[directory] = above if above is not None else (directory if directory in with_files else None)
        return highest[directory]

    groups: Dict[str, List[Tuple[int, int, str]]] = {}
    for size, index, path in sizes:
        groups.setdefault(group(directory_of[index]), []).append((size, index, path))
    pieces: List[Tuple[int, List[Tuple[int, int, str]]]] = []
    for members in groups.values():
        members.sort(key=lambda item: (directory_of[item[1]], -item[0], item[1]))
        piece: List[Tuple[int, int, str]] = []
        weight = 0
        for run in _runs(members, directory_of):
            # Whole directories where they fit: a cut inside one may send a script and the module
            # it imports to different workers.
            if piece and (weight + sum(size for size, _, _ in run) > target or len(piece) + len(run) > 64):
                pieces.append((weight, piece))
                piece, weight = [], 0
            for member in run:  # a directory bigger than a batch is split, biggest files first
                piece.append(member)
                weight += member[0]
                if weight >= target or len(piece) >= 64:
                    pieces.append((weight, piece))
                    piece, weight = [], 0
        if piece:
            pieces.append((weight, piece))
    pieces.sort(key=lambda item: (-item[0], item[1][0][1]))
    batches: List[List[Tuple[int, str]]] = []
    current: List[Tuple[int, str]] = []
    weight = 0
    for piece_weight, piece in pieces:
        current.extend((index, path) for _, index, path in piece)
        weight += piece_weight
        if weight >= target or len(current) >= 64:
            batches.append(current)
            current, weight = [], 0
    if current:
        batches.append(current)
    return batches


def _runs(members, directory_of) -> List[List[Tuple[int, int, str]]]:
    """`members` (sorted by directory) cut into runs of one directory each."""
    runs: List[List[Tuple[int, int, str]]] = []
    for member in members:
        if runs and directory_of[runs[-1][0][1]] == directory_of[member[1]]:
            runs[-1].append(member)
        else:
            runs.append([member])
    return runs


def _context():
    import multiprocessing
    import threading

    methods = multiprocessing.get_all_start_methods()
    if sys.platform.startswith("linux") and "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    if "forkserver" in methods:
        return multiprocessing.get_context("forkserver")
    return multiprocessing.get_context("spawn")


def _run_pool(linter: Linter, files: Sequence[str], jobs: int, progress=None) -> List[FileResult]:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    results: List[Optional[FileResult]] = [None] * len(files)
    batches = _batches(files, jobs)
    # Import the parse path before forking so that every worker starts with it.
    import torchlint.runner  # noqa: F401

    try:
        with ProcessPoolExecutor(max_workers=min(jobs, len(batches)), mp_context=_context(),
                                 initializer=_init_worker, initargs=(linter,)) as pool:
            futures = [pool.submit(_lint_batch, batch) for batch in batches]
            for future in as_completed(futures):
                try:
                    batch = future.result()
                    for index, result in batch:
                        results[index] = result
                    if progress is not None:
                        progress.advance(len(batch))
                except BrokenProcessPool:
                    break
    except (OSError, BrokenProcessPool):
        pass  # no processes on this system, or a worker died: finish in-process below
    for index, result in enumerate(results):
        if result is None:
            results[index] = linter.lint(files[index])
    return results  # type: ignore[return-value]


def lint_paths(run) -> List[FileResult]:
    """FileResults for `run.files`, in that order (the CLI's lint path)."""
    import gc

    collecting = gc.isenabled()
    try:
        return _lint_paths(run)
    finally:
        if collecting:  # the linter turns automatic collection off while it runs (Linter._rules)
            # What the lint left alive (project files' parse trees kept for their importers) would
            # otherwise be scanned by the first collection after this, all of it at once: a tenth
            # of a cold run over a tree of training scripts. It is kept until the process exits.
            gc.freeze()
            gc.enable()


def _lint_paths(run) -> List[FileResult]:
    args = run.args
    cache_dir = None
    manifest = None
    if not getattr(args, "no_cache", False):
        from torchlint.cache import Cache, cache_directory

        cache_dir = str(cache_directory(run.config, getattr(args, "cache_dir", None)))
        manifest = Cache(cache_dir).load_manifest()
    linter = Linter(run.config, run.select, run.ignore, cache_dir, manifest)
    from torchlint.terminal import progress_for

    progress = progress_for(args, len(run.files))
    try:
        return _lint_files(linter, list(run.files), getattr(args, "jobs", None), progress)
    finally:
        if progress is not None:
            progress.clear()  # before any finding is printed
        linter.flush()


def _lint_files(linter: Linter, files: List[str], jobs: Optional[int], progress=None) -> List[FileResult]:
    """`progress` (a torchlint.terminal.Progress or None) is told of every file done."""
    jobs = default_jobs() if not jobs or jobs < 1 else jobs
    results: List[Optional[FileResult]] = [None] * len(files)
    if linter.cache is not None and jobs > 1 and len(files) >= MIN_PARALLEL_FILES:
        # Hits first, here: a warm run then starts no worker and imports no parser at all.
        for index, path in enumerate(files):
            results[index] = linter.cached(path)
    todo = [index for index, result in enumerate(results) if result is None]
    if progress is not None and len(todo) < len(files):
        progress.advance(len(files) - len(todo))
    jobs = min(jobs, len(todo))
    if jobs <= 1 or len(todo) < MIN_PARALLEL_FILES:
        for index in todo:
            results[index] = linter.lint(files[index])
            if progress is not None:
                progress.advance()
    else:
        linter._all()  # resolve the manifest once, before the workers copy the linter
        done = _run_pool(linter, [files[index] for index in todo], jobs, progress)
        for index, result in zip(todo, done):
            results[index] = result
    return results  # type: ignore[return-value]
