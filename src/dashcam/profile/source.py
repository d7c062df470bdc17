"""Find and check the input file: an ``nsys export --type sqlite`` file or a ``.nsys-rep``.

The profile is only ever opened read-only (``mode=ro`` URIs); its bytes never change.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import quote

from dashcam.errors import (
    CorruptProfile,
    NotNsysExport,
    NotSQLite,
    NsysUnavailable,
    ProfileIsDirectory,
    ProfileNotFound,
)

SQLITE_MAGIC = b"SQLite format 3\x00"

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


def export_nsys_rep(rep: Path) -> Path:
    """Export a .nsys-rep to SQLite with the ``nsys`` on PATH, into the user cache; reuse it while unchanged."""
    if not rep.exists():
        raise ProfileNotFound(f"{rep}: no such file")
    if rep.is_dir():
        raise ProfileIsDirectory(f"{rep}: is a directory, not a profile")
    nsys = shutil.which("nsys")
    if nsys is None:
        raise NsysUnavailable(
            f"{rep}: `nsys` is not on PATH; export it by hand with "
            f"`nsys export --type sqlite --output {rep.with_suffix('.sqlite')} {rep}` and pass the .sqlite"
        )
    fp = file_fingerprint(rep)
    out_dir = user_cache_dir() / "exports" / fp
    out = out_dir / (rep.stem + ".sqlite")
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / (rep.stem + ".partial.sqlite")
    cmd = [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(tmp), str(rep)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NsysUnavailable(f"{rep}: `nsys export` could not run ({e})") from None
    if proc.returncode != 0 or not tmp.exists():
        last = (proc.stderr or proc.stdout or "").strip().splitlines()
        why = last[-1] if last else f"exit code {proc.returncode}"
        raise NsysUnavailable(f"{rep}: `nsys export --type sqlite` failed: {why}")
    tmp.replace(out)
    return out


def resolve_profile(path: str | os.PathLike) -> Path:
    """Return the SQLite file to read for ``path`` (exporting a .nsys-rep first)."""
    p = Path(path).expanduser()
    if p.suffix == ".nsys-rep" or p.suffix == ".qdrep":
        return export_nsys_rep(p)
    return p
