"""The columnar cache: the profile's event tables copied once into Parquet files.

DuckDB's sqlite extension is a download, unavailable on air-gapped machines, so the
tables are read with Apache Arrow's ADBC SQLite driver (straight into Arrow) in row-id
chunks on two threads and written as Parquet. DuckDB then queries the Parquet files. The cache
lives in ``<profile>.dashcam/`` when the profile's folder is writable, otherwise (or
when ``DASHCAM_CACHE_DIR`` is set) in the user cache dir. It is reused while the
profile's fingerprint is unchanged and rebuilt when it changes; it is never written
inside the profile.

It survives faults (docs/input.md, "Cache"):

- the manifest lists every file with its size and a CRC of its head and tail; a file that is
  missing, truncated or rewritten, or a read error on it, gets the cache rebuilt once with a
  note on stderr (``CacheDamaged`` when it happens again);
- one process builds at a time: a lock file beside the cache names the builder (pid, machine) and
  is touched every few seconds; others wait for it, and break it when its process is dead (a
  builder of this machine) or it has not been touched for ``STALE_S`` seconds (another machine's);
- a build works in a ``.build-*`` folder that names its builder; the next build removes those
  of dead builders, judged the same way;
- no room or no write access is ``CacheUnwritable``, naming the folder, the room the cache
  needs and ``DASHCAM_CACHE_DIR``; nothing half-written stays.

The package, one concern per module (each imports only the ones listed before it):

- ``hooks``    the build's test checkpoints (DASHCAM_TEST_HOOK) and the one-line notes on stderr;
- ``where``    where a profile's cache lives, the cache version, reading the manifest;
- ``lock``     one builder at a time: the lock file, who holds it, stale builds swept;
- ``check``    the files against the manifest, a reader's error traced to the cache that caused it;
- ``listing``  the caches this user has (``dashcam cache``);
- ``exports``  the SQLite exports of .nsys-rep/.qdrep reports in the user cache dir (``dashcam cache``);
- ``build``    the export's tables read in chunks and written as Parquet, then the derived tables;
- ``open``     ``ensure_cache``: reuse a sound, current cache or build one under the lock.
"""
from __future__ import annotations

from dashcam.profile.cache.check import (
    OPENED,
    cache_of_error,
    check_files,
    file_check,
    invalidate,
    mark_used,
    verify_cache,
)
from dashcam.profile.cache.exports import exports_of, is_report, known_exports, remove_export
from dashcam.profile.cache.hooks import HOOK_ENV
from dashcam.profile.cache.listing import REGISTRY, caches_of, dir_size, forget_missing, known_caches, remove_cache
from dashcam.profile.cache.open import NEED_RATIO, ensure_cache, needed_bytes
from dashcam.profile.cache.where import CACHE_VERSION, cache_dir_for, dir_writable, read_manifest, user_cache_dir_for

__all__ = ["CACHE_VERSION", "HOOK_ENV", "NEED_RATIO", "OPENED", "REGISTRY", "cache_dir_for",
           "cache_of_error", "caches_of", "check_files", "dir_size", "dir_writable", "ensure_cache", "exports_of",
           "file_check", "forget_missing", "invalidate", "is_report", "known_caches", "known_exports", "mark_used",
           "needed_bytes", "read_manifest", "remove_cache", "remove_export", "user_cache_dir_for", "verify_cache"]
