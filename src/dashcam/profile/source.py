"""Find and check the input file: an ``nsys export --type sqlite`` file or a ``.nsys-rep``.

The profile is only ever opened read-only (``mode=ro`` URIs); its bytes never change.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import quote

from dashcam.errors import (
    CorruptProfile,
    NotNsysExport,
    NotSQLite,
    NsysNotFound,
    NsysUnavailable,
    ProfileIsDirectory,
    ProfileNotFound,
    ReportTooNew,
)

SQLITE_MAGIC = b"SQLite format 3\x00"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")  # Nsight Systems reports (.qdrep: nsys 2021.3 and older); exported first
PROFILE_SUFFIXES = (".sqlite", *REPORT_SUFFIXES)  # what dashcam opens, and finds as the default profile


def profiles_in(folder: Path) -> list[Path]:
    """The profiles in ``folder`` (not its sub-folders, no hidden files); a report with a .sqlite of the same stem
    beside it (its export) counts once, as the .sqlite."""
    files = [f for f in folder.iterdir() if f.is_file() and f.suffix in PROFILE_SUFFIXES and not f.name.startswith(".")]
    sqlite_stems = {f.stem for f in files if f.suffix == ".sqlite"}
    return sorted(f for f in files if f.suffix == ".sqlite" or f.stem not in sqlite_stems)

# Any of these tables marks a file as an Nsight Systems export.
NSYS_MARKER_TABLES = {
    "StringIds",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "NVTX_EVENTS",
    "META_DATA_EXPORT",
    "EXPORT_META_DATA",
    "TARGET_INFO_GPU",
    "TARGET_INFO_SESSION_START_TIME",
}


def readonly_uri(path: Path) -> str:
    return f"file:{quote(str(path.resolve()))}?mode=ro"


def connect_readonly(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(readonly_uri(path), uri=True)


def check_sqlite_file(path: Path) -> list[str]:
    """Check that ``path`` is a complete SQLite file and an nsys export; return its table names."""
    if not path.exists():
        raise ProfileNotFound(f"{path}: no such file")
    if path.is_dir():
        raise ProfileIsDirectory(f"{path}: is a directory, not a profile (pass the .sqlite or .nsys-rep file)")
    size = path.stat().st_size
    with open(path, "rb") as f:
        header = f.read(100)
    if len(header) < 100 and header.startswith(SQLITE_MAGIC):
        raise CorruptProfile(f"{path}: truncated SQLite file ({size} bytes, shorter than its header); "
                             "copy or export it again")
    if len(header) < 100 or header[:16] != SQLITE_MAGIC:
        raise NotSQLite(f"{path}: not an SQLite file (expected the output of `nsys export --type sqlite`)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    page_count = int.from_bytes(header[28:32], "big")
    change_counter = int.from_bytes(header[24:28], "big")
    valid_for = int.from_bytes(header[92:96], "big")
    if page_count and valid_for == change_counter and size < page_count * page_size:
        raise CorruptProfile(
            f"{path}: truncated SQLite file ({size} of {page_count * page_size} bytes); copy or export it again"
        )
    try:
        con = connect_readonly(path)
        try:
            tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        raise CorruptProfile(f"{path}: unreadable SQLite file ({e})") from None
    if not NSYS_MARKER_TABLES.intersection(tables):
        raise NotNsysExport(
            f"{path}: SQLite file without Nsight Systems tables (no StringIds, CUPTI_* or NVTX_EVENTS); "
            "is it the output of `nsys export --type sqlite`?"
        )
    return tables


def user_cache_dir() -> Path:
    base = os.environ.get("DASHCAM_CACHE_DIR")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "dashcam"


def file_fingerprint(path: Path) -> str:
    """Cheap identity of a file's content: size, mtime and a hash of its first and last MiB."""
    st = path.stat()
    h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
        if st.st_size > 2 << 20:
            f.seek(-(1 << 20), os.SEEK_END)
            h.update(f.read(1 << 20))
    return h.hexdigest()[:32]


NSYS_ENV = "DASHCAM_NSYS"  # the nsys to export .nsys-rep files with (also the global --nsys option)
_HEADER_VERSION = re.compile(rb"Report (\d{4})@(\d+)@(\d+)@(\d+)")
_TOO_NEW = re.compile(r"newer than your current version", re.IGNORECASE)


_named_by_option: str | None = None  # the global --nsys's value (name_nsys), so that an error names the option


def name_nsys(path: str) -> None:
    """The global ``--nsys PATH`` (cli.py): the nsys of this process and its children, through $DASHCAM_NSYS."""
    global _named_by_option
    _named_by_option = path
    os.environ[NSYS_ENV] = path


def find_nsys() -> str:
    """The nsys to export with: --nsys / $DASHCAM_NSYS (a file or the folder holding it), else the one on PATH."""
    named = os.environ.get(NSYS_ENV, "").strip()
    if named:
        p = Path(named).expanduser()
        p = p / "nsys" if p.is_dir() else p
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        given = f"--nsys {named}" if named == (_named_by_option or "").strip() else f"{NSYS_ENV}={named}"
        raise NsysNotFound(f"{given}: no executable nsys there")
    found = shutil.which("nsys")
    if found is None:
        raise NsysNotFound("`nsys` is not on PATH")
    return found


# A report's session record near its end (a protobuf message): the recording nsys's version string
# ("2020.3.2.6-87e152c", also in reports whose header has none: "Report 1.") and, as field 25, the `nsys profile`
# command line that recorded it.
_TAIL_BYTES = 64 << 10
_TAIL_VERSION = re.compile(rb"(?<![\d.])(20\d\d\.\d+\.\d+\.\d+)-[0-9a-f]+")
_TAIL_COMMAND_TAG = b"\xca\x01"
_NSYS_PROFILE = re.compile(r"(^|/|\\)nsys(\.exe)?\s+profile\b")


def _report_tail(rep: Path) -> bytes:
    try:
        with open(rep, "rb") as f:
            f.seek(max(0, rep.stat().st_size - _TAIL_BYTES))
            return f.read()
    except OSError:
        return b""


def report_version(rep: Path) -> str | None:
    """The Nsight Systems version that recorded ``rep``: from its header ("Report 2024@4@1@61"), else from the
    session record at its end (older reports' header says "Report 1."); None when neither has one."""
    try:
        with open(rep, "rb") as f:
            m = _HEADER_VERSION.search(f.read(256))
    except OSError:
        return None
    if m:
        return ".".join(g.decode() for g in m.groups())
    found = _TAIL_VERSION.findall(_report_tail(rep))
    return found[-1].decode() if found else None


def report_nsys_command(rep: Path) -> str | None:
    """The `nsys profile ...` command line that recorded ``rep``, from its session record; None when absent."""
    tail = _report_tail(rep)
    at = tail.rfind(_TAIL_COMMAND_TAG)
    while at >= 0:
        text = _length_prefixed(tail, at + len(_TAIL_COMMAND_TAG))
        if text is not None and _NSYS_PROFILE.search(text):
            return text.strip()
        at = tail.rfind(_TAIL_COMMAND_TAG, 0, at)
    return None


def _length_prefixed(buf: bytes, i: int) -> str | None:
    """The printable UTF-8 string at ``buf[i:]`` after its varint length, or None."""
    n = shift = 0
    while i < len(buf) and shift < 28:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    raw = buf[i:i + n]
    if not n or len(raw) < n:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if text.isprintable() else None


def nsys_version(nsys: str) -> str | None:
    """``nsys --version``'s version number ("2024.2.3.38"), or None."""
    try:
        out = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d{4}\.\d+\.\d+(?:\.\d+)?)", out or "")
    return m.group(1) if m else None


def _by_hand(rep: Path) -> str:
    return f"`nsys export --type sqlite --output {rep.with_suffix('.sqlite').name} {rep.name}`"


EXPORTS = "exports"  # the user cache dir's folder of .nsys-rep exports, one sub-folder per report fingerprint
EXPORT_RECORD = "report.json"  # in each: the report it came from (path, size), the nsys and its version


def export_path_for(rep: Path) -> Path:
    """Where the SQLite export of ``rep`` (as the report is now) lives: exports/<fingerprint>/<stem>.sqlite."""
    return user_cache_dir() / EXPORTS / file_fingerprint(rep) / (rep.stem + ".sqlite")


def export_nsys_rep(rep: Path) -> Path:
    """Export a .nsys-rep to SQLite into the user cache, reused while the report is unchanged (nsys is needed
    only for the first export); the nsys is $DASHCAM_NSYS or the one on PATH. A failed export leaves nothing."""
    if not rep.exists():
        raise ProfileNotFound(f"{rep}: no such file")
    if rep.is_dir():
        raise ProfileIsDirectory(f"{rep}: is a directory, not a profile")
    out = export_path_for(rep)
    out_dir = out.parent
    if out.exists():
        try:
            os.utime(out_dir)  # its last use, for `dashcam cache clear --older-than`
        except OSError:
            pass
        return out
    try:
        nsys = find_nsys()
    except NsysNotFound as e:
        raise NsysNotFound(f"{rep}: {e}; install Nsight Systems (docs/input.md) and set {NSYS_ENV} or --nsys to "
                           f"its nsys, or export it by hand with {_by_hand(rep)} and pass the .sqlite") from None
    fresh = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / (rep.stem + ".partial.sqlite")
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(tmp), str(rep)]
    try:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise NsysUnavailable(f"{rep}: `nsys export` could not run ({e})") from None
        if proc.returncode != 0 or not tmp.exists():
            text = (proc.stderr or "") + "\n" + (proc.stdout or "")
            recorded, local = report_version(rep), nsys_version(nsys)
            if _TOO_NEW.search(text) or (recorded and local and _newer(recorded, local)):
                raise ReportTooNew(
                    f"{rep}: recorded by Nsight Systems {recorded or '(a newer version)'}, newer than this nsys "
                    f"({local or 'unknown version'}, {nsys}); export it with nsys {recorded or 'of that version'} "
                    f"or newer — on the machine that recorded it, {_by_hand(rep)}, then pass the .sqlite — or "
                    f"install a newer Nsight Systems and set {NSYS_ENV} or --nsys to its nsys")
            last = [ln for ln in text.strip().splitlines() if ln.strip()]
            why = last[-1] if last else f"exit code {proc.returncode}"
            raise NsysUnavailable(f"{rep}: `nsys export --type sqlite` failed: {why}")
        _write_record(out_dir, rep, nsys)
        tmp.replace(out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        if fresh:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    return out


def _write_record(out_dir: Path, rep: Path, nsys: str) -> None:
    """exports/<fingerprint>/report.json: which report the export came from (``dashcam cache`` lists it)."""
    record = {"report": str(rep.resolve()), "report_bytes": rep.stat().st_size, "nsys": nsys,
              "recorded_with": report_version(rep), "exported_with": nsys_version(nsys)}
    (out_dir / EXPORT_RECORD).write_text(json.dumps(record, indent=1))


def read_export_record(export_dir: Path) -> dict:
    """An export folder's report.json ({} when absent or unreadable — exports of older dashcams — and for a folder
    outside the user cache dir's exports/)."""
    if export_dir.resolve().parent != (user_cache_dir() / EXPORTS).resolve():
        return {}
    try:
        record = json.loads((export_dir / EXPORT_RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _newer(a: str, b: str) -> bool:
    """Version ``a`` is newer than ``b`` (dotted numbers)."""
    key = lambda v: [int(x) for x in re.findall(r"\d+", v)[:4]]
    return key(a) > key(b)


def resolve_profile(path: str | os.PathLike) -> Path:
    """Return the SQLite file to read for ``path`` (exporting a .nsys-rep first)."""
    p = Path(path).expanduser()
    if p.suffix in REPORT_SUFFIXES:
        return export_nsys_rep(p)
    return p
