"""The Delta jars a local session loads: resolved by Spark's Ivy once, then named directly.

``spark.jars.packages`` makes every JVM start run Ivy over the package's whole dependency
tree (about 30 modules for Delta 4.4), even when each jar is already in the cache. After a
local session started that way, the jars Ivy put in its cache for it are recorded, keyed
by every setting that decides the resolution; a later local session with the same
settings, whose recorded files are all still there, names them in ``spark.jars`` and
skips Ivy (decision 025). Anything missing, changed or unreadable falls back to Ivy.
Only local sessions use the record: a ``spark-conf`` properties file keeps the packages,
since it may be used on another machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path
from urllib.parse import unquote, urlparse

from sbqueue.spark.paths import cache_dir

__all__ = ["PACKAGES", "record_of", "record_resolved", "use_resolved"]

PACKAGES = "spark.jars.packages"
_JARS = "spark.jars"


def record_of(conf: dict[str, str]) -> Path | None:
    """Where the resolution ``conf`` asks for is recorded: keyed by the packages and every
    other Ivy setting (excludes, repositories, cache, settings file); None without
    packages."""
    if not conf.get(PACKAGES):
        return None
    settings = sorted((k, v) for k, v in conf.items() if k.startswith("spark.jars."))
    key = hashlib.sha256(repr(settings).encode()).hexdigest()[:16]
    return cache_dir() / "jars" / f"resolved-{key}.txt"


def _complete(packages: str, jars: list[Path]) -> bool:
    """Whether ``jars`` hold each package itself, as Ivy names its copy
    (``group_artifact-version.jar``): a list without them is not this resolution."""
    names = {p.name for p in jars}
    wanted = [c.strip().split(":") for c in packages.split(",") if c.strip()]
    return bool(wanted) and all(len(c) == 3 and f"{c[0]}_{c[1]}-{c[2]}.jar" in names
                                for c in wanted)


def use_resolved(conf: dict[str, str]) -> bool:
    """Name the recorded jars of ``conf``'s resolution in ``spark.jars`` (after the user's
    own entries, kept as given) and drop the packages and the Ivy settings file, when
    every recorded file is still there; whether that was done."""
    record = record_of(conf)
    if record is None:
        return False
    try:
        recorded = [Path(line) for line in record.read_text().splitlines() if line]
    except (OSError, ValueError):  # none yet, or unreadable: Ivy decides
        return False
    if not _complete(conf[PACKAGES], recorded) or not all(p.is_file() for p in recorded):
        return False
    own = [e.strip() for e in conf.get(_JARS, "").split(",") if e.strip()]
    conf[_JARS] = ",".join([*own, *(str(p) for p in recorded)])
    del conf[PACKAGES]
    conf.pop("spark.jars.ivySettings", None)  # else spark-submit still sets Ivy up
    return True


def record_resolved(record: Path, packages: str, ivy_dir: str, local_jars: str) -> None:
    """Record the jars of ``local_jars`` (a started session's ``spark.repl.local.jars``,
    where spark-submit lists what Ivy resolved) that lie in Ivy's own folder: a user's
    jars are not part of the resolution. Best effort: the session is up either way."""
    folder = Path(ivy_dir).resolve() / "jars"
    entries = (e.strip() for e in local_jars.split(","))
    found = [p for p in dict.fromkeys(_local(e) for e in entries if e)
             if p.parent == folder and p.suffix == ".jar" and p.is_file()]
    if not _complete(packages, found):
        return  # not a session that resolved these packages: nothing to learn from it
    with contextlib.suppress(OSError):
        record.parent.mkdir(parents=True, exist_ok=True)
        handle, staged = tempfile.mkstemp(dir=record.parent, suffix=".tmp")
        with os.fdopen(handle, "w") as out:
            out.write("".join(f"{p}\n" for p in found))
        os.replace(staged, record)


def _local(entry: str) -> Path:
    """A ``file:`` URI or a path, as an absolute local path."""
    parsed = urlparse(entry)
    return (Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(entry)).resolve()
