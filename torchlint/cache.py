"""The result cache: `.torchlint_cache/`, entries keyed by (file content, version, config, rules).

Layout (ruff's habits): the directory holds `CACHEDIR.TAG` (so backup tools skip it) and a
`.gitignore` of `*` (so it never shows up in `git status`), then `v2/entries-<hex digit>.log`, the
entries whose key starts with that digit, one line each, and `v2/rules-<fingerprint>.json`, the
rule manifest that lets a warm run pick rules and pre-filter files without importing LibCST or the
rules.

The key is the BLAKE2b (256 bits) of: the cache format, torchlint's version, the fingerprint of
torchlint's own source (so editing a rule invalidates everything), the codes of the rules enabled
for that file (select/ignore/per-file-ignores resolved), the file kind and the file's bytes.
Findings are stored without their path (a moved file still hits) and get it back on load.

Why sixteen logs and not a file per entry: creating a file is the expensive part of writing one
(a new inode, a directory entry, a rename), 0.2-0.5 ms each on a virtual machine's disk, so a
cold run over pytorch/examples spent 21-48 ms writing 93 small files. A run now keeps its new
entries in memory and appends them once per log when it ends (and every `FLUSH_EVERY` entries,
so that an interrupted run keeps most of its work): at most sixteen appends, 1-2 ms. A read
loads a log once per process and indexes it by key.

Concurrency and damage: every line is `<key> <check> <JSON>\n` where the check is a BLAKE2b of
the key and the JSON, and a log is only ever appended to with one `write` per run and log
(`O_APPEND`), or replaced whole (`os.replace`) when it is compacted. A line cut short (a crash, a
full disk), interleaved with another writer's, or edited by hand fails its check and reads as a
miss; the last good line of a key wins. A log that grows past `MAX_LOG_BYTES` is rewritten with
its newest entries only (what a concurrent run appended meanwhile may be lost: a miss, later).
Results with internal errors are never stored. Any OS error (read-only disk, full disk) disables
writing silently: the cache is an optimisation, never a failure.
"""

from __future__ import annotations

import json
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint import __version__
from torchlint.digest import blake2b
from torchlint.finding import Applicability, Edit, FileResult, Finding, Fix, Location, Severity

FORMAT = "v2"
DEFAULT_DIR = ".torchlint_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by torchlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)

_PACKAGE = Path(__file__).resolve().parent

# Entries a run keeps in memory before it appends them; a log compacted past this size keeps its
# newest half.
FLUSH_EVERY = 512
MAX_LOG_BYTES = 8 * 1024 * 1024
_KEY_LENGTH = 64
_CHECK_LENGTH = 32


# The verifier, `torchlint run` and the report formats do not change findings.
_UNFINGERPRINTED = ("verify", "output", "runtime")


def _analysis_sources() -> List[Tuple[str, str, int, int]]:
    """(path relative to the package with `/`, path, mtime in ns, size) of every source file the
    fingerprint covers, ordered by the relative path's parts."""
    found = []
    pending = [((), str(_PACKAGE))]
    while pending:
        parts, directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=True):
                    if entry.name != "__pycache__" and not (not parts and entry.name in _UNFINGERPRINTED):
                        pending.append((parts + (entry.name,), entry.path))
                elif entry.name.endswith(".py"):
                    stat = entry.stat()
                    found.append((parts + (entry.name,), entry.path, stat.st_mtime_ns, stat.st_size))
            except OSError:
                continue
    found.sort()
    return [("/".join(parts), path, mtime, size) for parts, path, mtime, size in found]


def _fingerprint_memo() -> str:
    return os.path.join(str(_PACKAGE), "__pycache__", "fingerprint.json")


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """A hash of torchlint's analysis code: any edit to a rule or the engine changes it.

    Reading and hashing those ~130 files is 5-10 ms of every cached run, so the digest is kept
    in `__pycache__/fingerprint.json` with each file's modification time (ns) and size, the test
    Python applies to its own bytecode, and reused while they all match; written only where
    bytecode may be written."""
    sources = _analysis_sources()
    stamps = [[relative, mtime, size] for relative, _path, mtime, size in sources]
    memo = _fingerprint_memo()
    try:
        with open(memo, "rb") as handle:
            kept = json.loads(handle.read())
        if kept["version"] == __version__ and kept["sources"] == stamps and isinstance(kept["digest"], str):
            return kept["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # missing, unreadable or stale: hash the sources
    digest = blake2b(__version__.encode(), digest_size=32)
    for relative, path, _mtime, _size in sources:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        digest.update(relative.encode() + b"\0" + data + b"\0")
    result = digest.hexdigest()[:32]
    if not sys.dont_write_bytecode:
        try:
            os.makedirs(os.path.dirname(memo), exist_ok=True)
            _atomic_write(Path(memo), json.dumps({"version": __version__, "digest": result, "sources": stamps}).encode())
        except OSError:
            pass  # a read-only installation: hash again next time
    return result


# --- Finding <-> JSON ---------------------------------------------------------------------------

def _loc(location: Location) -> List[int]:
    return [location.row, location.column]


def finding_to_json(finding: Finding) -> dict:
    data = {
        "code": finding.code,
        "message": finding.message,
        "start": _loc(finding.start),
        "end": _loc(finding.end),
        "rule_name": finding.rule_name,
        "cell": finding.cell,
        "diagnostic": finding.is_diagnostic,
        "severity": finding.severity.value,
        "fix": None,
    }
    if finding.related:
        data["related"] = [list(item) for item in finding.related]
    if finding.fix is not None:
        data["fix"] = {
            "message": finding.fix.message,
            "applicability": finding.fix.applicability.value,
            "edits": [[e.content, _loc(e.start), _loc(e.end)] for e in finding.fix.edits],
        }
    return data


def finding_from_json(data: dict, path: str) -> Finding:
    fix = None
    if data.get("fix") is not None:
        raw = data["fix"]
        fix = Fix(
            message=raw["message"],
            edits=tuple(Edit(str(c), Location(*s), Location(*e)) for c, s, e in raw["edits"]),
            applicability=Applicability(raw["applicability"]),
        )
    cell = data.get("cell")
    return Finding(
        code=str(data["code"]),
        message=str(data["message"]),
        path=path,
        start=Location(*data["start"]),
        end=Location(*data["end"]),
        rule_name=str(data.get("rule_name", "")),
        fix=fix,
        cell=int(cell) if cell is not None else None,
        is_diagnostic=bool(data.get("diagnostic", False)),
        severity=Severity(data.get("severity", "warning")),
        related=tuple((str(p), int(r), int(c), str(m)) for p, r, c, m in data.get("related") or ()),
    )


# --- the cache ----------------------------------------------------------------------------------

def cache_directory(config, cli_dir: Optional[str]) -> Path:
    """--cache-dir, else `cache-dir` from the config (relative to the config's directory), else
    .torchlint_cache next to the pyproject.toml (or in the current directory)."""
    root = Path(getattr(config, "root", None) or Path.cwd())
    if cli_dir:
        return Path(cli_dir)
    configured = getattr(config, "cache_dir", None)
    if configured:
        path = Path(os.path.expanduser(configured))
        return path if path.is_absolute() else root / path
    return root / DEFAULT_DIR


class Cache:
    def __init__(self, directory: Path, rules_fingerprint: Optional[str] = None) -> None:
        self.directory = Path(directory)
        self.entries = self.directory / FORMAT
        self.fingerprint = rules_fingerprint or fingerprint()
        self.writable = True
        self._prepared = False
        self._logs: Dict[str, Dict[bytes, List[bytes]]] = {}  # log digit -> key -> its lines
        self._pending: Dict[str, List[bytes]] = {}  # log digit -> lines not yet appended
        self._pending_count = 0

    # keys
    def key(self, data: bytes, codes: Sequence[str], kind: str) -> str:
        digest = blake2b(digest_size=32)
        header = f"torchlint-cache\0{FORMAT}\0{__version__}\0{self.fingerprint}\0{','.join(codes)}\0{kind}\0"
        digest.update(header.encode())
        digest.update(data)
        return digest.hexdigest()

    def _log_path(self, digit: str) -> str:
        return os.path.join(self.entries, f"entries-{digit}.log")

    # reads
    def _log(self, digit: str) -> Dict[bytes, List[bytes]]:
        lines = self._logs.get(digit)
        if lines is None:
            lines = self._logs[digit] = {}
            try:
                with open(self._log_path(digit), "rb") as handle:
                    data = handle.read()
            except OSError:
                return lines  # no log yet (or unreadable): every key is a miss
            for line in _whole_lines(data):
                key = line[:_KEY_LENGTH]
                found = lines.get(key)
                if found is None:
                    lines[key] = [line]
                else:
                    found.append(line)
        return lines

    def get(self, key: str, path: str) -> Optional[FileResult]:
        try:
            payload = None
            for line in reversed(self._log(_log_digit(key)).get(key.encode(), ())):
                payload = _checked_payload(line)  # the last line of the key that is whole
                if payload is not None:
                    break
            if payload is None:
                return None
            raw = json.loads(payload)
            dependencies = raw.get("dependencies") or {}
            if dependencies:
                from torchlint.analysis.project_files import digest_of

                if any(digest_of(file) != digest for file, digest in dependencies.items()):
                    return None  # a project file its analysis read has changed: lint it again
            findings = [finding_from_json(item, path) for item in raw["findings"]]
            return FileResult(path, findings, failed=bool(raw.get("failed", False)), dependencies=dependencies)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None  # corrupt or foreign: a miss

    # writes
    def _prepare(self) -> None:
        if self._prepared:
            return
        self._prepared = True
        try:
            self.entries.mkdir(parents=True, exist_ok=True)
            for name, content in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", "# Created by torchlint\n*\n")):
                target = self.directory / name
                if not target.exists():
                    _atomic_write(target, content.encode())
        except OSError:
            self.writable = False

    def put(self, key: str, result: FileResult) -> None:
        """Keep `result` for `key`; it reaches the disk at the next `flush`."""
        if result.internal_error or not self.writable:
            return
        if any(f.code == "TL903" for f in result.findings):
            return
        payload = {
            "failed": result.failed,
            "findings": [finding_to_json(f) for f in result.findings],
        }
        if result.dependencies:
            payload["dependencies"] = result.dependencies
        line = _line(key, json.dumps(payload, separators=(",", ":")).encode())
        digit = _log_digit(key)
        self._log(digit).setdefault(line[:_KEY_LENGTH], []).append(line)  # the same bytes again hit
        self._pending.setdefault(digit, []).append(line + b"\n")
        self._pending_count += 1
        if self._pending_count >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Append the entries kept since the last flush, one write per log."""
        pending, self._pending, self._pending_count = self._pending, {}, 0
        if not pending or not self.writable:
            return
        self._prepare()
        if not self.writable:
            return
        try:
            for digit, lines in sorted(pending.items()):
                path = self._log_path(digit)
                size = _append(path, b"".join(lines))
                if size > MAX_LOG_BYTES:
                    _compact(path, MAX_LOG_BYTES // 2)
        except OSError:
            self.writable = False

    # the rule manifest: codes and triggers, so a warm run needs neither LibCST nor the rules
    def _manifest_path(self) -> Path:
        return self.entries / f"rules-{self.fingerprint}.json"

    def load_manifest(self) -> Optional[List[Tuple[str, Tuple[str, ...], bool]]]:
        try:
            raw = json.loads(self._manifest_path().read_bytes())
            if raw.get("fingerprint") != self.fingerprint:
                return None
            return [(str(code), tuple(str(t) for t in triggers), bool(cross_file))
                    for code, triggers, cross_file in raw["rules"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def save_manifest(self, rules) -> None:
        self._prepare()
        if not self.writable:
            return
        payload = {"fingerprint": self.fingerprint,
                   "rules": [[r.code, list(r.triggers), r.cross_file_triggers] for r in rules]}
        try:
            _atomic_write(self._manifest_path(), json.dumps(payload).encode())
        except OSError:
            self.writable = False


def _log_digit(key: str) -> str:
    """The log an entry goes to: its key's first hex digit. Sixteen logs keep each one small for
    a large tree's cache, and a cold run over a small tree appends to at most sixteen files."""
    return key[:1]


def _whole_lines(data: bytes) -> List[bytes]:
    """A log's lines; the piece after the last newline is a line still being written, or cut
    short, and is left out."""
    return data.split(b"\n")[:-1]


def _check(key: bytes, payload: bytes) -> bytes:
    return blake2b(key + b" " + payload, digest_size=_CHECK_LENGTH // 2).hexdigest().encode()


def _line(key: str, payload: bytes) -> bytes:
    encoded = key.encode()
    return encoded + b" " + _check(encoded, payload) + b" " + payload


def _checked_payload(line: bytes) -> Optional[bytes]:
    """The JSON of a log line whose check holds, else None."""
    key = line[:_KEY_LENGTH]
    check_end = _KEY_LENGTH + 1 + _CHECK_LENGTH
    if len(line) <= check_end + 1 or line[_KEY_LENGTH:_KEY_LENGTH + 1] != b" " \
            or line[check_end:check_end + 1] != b" ":
        return None
    payload = line[check_end + 1:]
    return payload if _check(key, payload) == line[_KEY_LENGTH + 1:check_end] else None


def _append(path: str, data: bytes) -> int:
    """Append `data` to `path` with one `write` where the system allows; the log's size after.
    A line cut short by a crash would swallow the first line appended after it, so it is ended
    first (it fails its check: a miss)."""
    descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(descriptor).st_size
        if size:
            os.lseek(descriptor, size - 1, os.SEEK_SET)
            if os.read(descriptor, 1) != b"\n":  # a line left unfinished (a crash): end it
                data = b"\n" + data
        _write_all(descriptor, data)
        return os.fstat(descriptor).st_size
    finally:
        os.close(descriptor)


def _compact(path: str, keep_bytes: int) -> None:
    """Rewrite the log at `path` with its newest good entries, one line per key, at most
    `keep_bytes` of them."""
    with open(path, "rb") as handle:
        data = handle.read()
    newest: Dict[bytes, bytes] = {}
    for line in _whole_lines(data):
        if _checked_payload(line) is not None:
            newest.pop(line[:_KEY_LENGTH], None)
            newest[line[:_KEY_LENGTH]] = line  # re-inserted: the dict's order is the lines' order
    kept: List[bytes] = []
    size = 0
    for line in reversed(list(newest.values())):
        size += len(line) + 1
        if size > keep_bytes:
            break
        kept.append(line + b"\n")
    kept.reverse()
    _atomic_write(path, b"".join(kept))


def _atomic_write(target, data: bytes) -> None:
    """Write the file at `target` (a path) atomically: a temporary file renamed into place. Its
    name is made of this process's id and the target's name, unique among live writers, so it
    needs no random names and retries (a leftover of a dead process with the same id is simply
    overwritten)."""
    directory, name = os.path.split(os.fspath(target))
    temporary = os.path.join(directory, f".tmp-{os.getpid()}-{name}")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(descriptor, data)
        finally:
            os.close(descriptor)
        os.replace(temporary, os.path.join(directory, name))
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view):]
