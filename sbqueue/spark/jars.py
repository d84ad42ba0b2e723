"""The Delta jars a local session loads: resolved by Spark's Ivy once, then named directly.

``spark.jars.packages`` makes every JVM start run Ivy over the package's whole dependency
tree (about 30 modules for Delta 4.4), even when each jar is already in the cache. After a
session started that way, the jars Ivy handed Spark are recorded, keyed by the packages
they came from; a later start whose files are all still there names them in
``spark.jars`` and skips Ivy (decision 025). Anything missing or changed falls back to
``spark.jars.packages``, so the record can only save time, never change what is loaded.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

from sbqueue.spark.paths import cache_dir

if TYPE_CHECKING:
    from pyspark import SparkConf

__all__ = ["PACKAGES", "record_resolved", "use_resolved"]

PACKAGES = "spark.jars.packages"
_JARS = "spark.jars"


def _record(packages: str) -> Path:
    key = hashlib.sha256(packages.encode()).hexdigest()[:16]
    return cache_dir() / "jars" / f"resolved-{key}.txt"


def _paths(jars: str) -> list[Path]:
    """``spark.jars`` entries (paths or ``file:`` URIs) as local paths."""
    out = []
    for entry in (e.strip() for e in jars.split(",")):
        if entry:
            parsed = urlparse(entry)
            out.append(Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(entry))
    return out


def _complete(packages: str, jars: list[Path]) -> bool:
    """Whether ``jars`` hold each package itself, as Ivy names its copy
    (``group_artifact-version.jar``): a list without them is not this resolution."""
    names = {p.name for p in jars}
    wanted = [c.strip().split(":") for c in packages.split(",") if c.strip()]
    return bool(wanted) and all(len(c) == 3 and f"{c[0]}_{c[1]}-{c[2]}.jar" in names
                                for c in wanted)


def use_resolved(conf: dict[str, str]) -> bool:
    """Name the recorded jars of ``conf``'s packages in ``spark.jars`` and drop the
    packages, when every recorded file is still there; whether that was done."""
    packages = conf.get(PACKAGES)
    if not packages:
        return False
    try:
        recorded = [Path(line) for line in _record(packages).read_text().splitlines() if line]
    except OSError:
        return False
    if not _complete(packages, recorded) or not all(p.is_file() for p in recorded):
        return False
    own = [str(p) for p in _paths(conf.get(_JARS, ""))]
    conf[_JARS] = ",".join([*own, *(str(p) for p in recorded if str(p) not in own)])
    del conf[PACKAGES]
    conf.pop("spark.jars.ivySettings", None)  # else spark-submit still sets Ivy up
    return True


def record_resolved(packages: str, started: SparkConf, own_jars: str) -> None:
    """Record the jars a session started with ``packages`` was given beyond the ones
    sbqueue named itself (``own_jars``). spark-submit puts Ivy's jars on the driver's
    class path and lists them in ``spark.repl.local.jars``, not in ``spark.jars``."""
    own = set(_paths(own_jars))
    listed = _paths(started.get("spark.repl.local.jars", "") or "")
    found = [p for p in dict.fromkeys(listed)
             if p not in own and p.suffix == ".jar" and p.is_file()]
    if not _complete(packages, found):
        return  # not a session that resolved these packages: nothing to learn from it
    target = _record(packages)
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_suffix(f".{os.getpid()}.tmp")
    staged.write_text("".join(f"{p}\n" for p in found))
    os.replace(staged, target)
