"""Build (once per machine) the jar of sbqueue's Delta log stores.

Two stores, whose Java sources ship with the package (``java/``): ``LinkLogStore``, safe
across processes on a local folder (docs/decisions/002-local-log-store.md), and
``PutIfAbsentLogStore``, which claims versions on S3 by conditional writes as the driver's
commits and delta-rs do (decision 042). They are compiled against the ``delta-storage`` jar
that Spark's Ivy resolution downloads and Spark's own Hadoop, and cached under
``~/.cache/sbqueue/jars`` keyed by the sources and the packages.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from sbqueue.exceptions import SparkSetupError
from sbqueue.spark.paths import cache_dir

__all__ = ["LOGSTORE_CLASS", "PUT_IF_ABSENT_CLASS", "ensure_logstore_jar"]

LOGSTORE_CLASS = "io.sbqueue.storage.LinkLogStore"
# S3 and other stores with conditional writes (decision 042)
PUT_IF_ABSENT_CLASS = "io.sbqueue.storage.PutIfAbsentLogStore"
_SOURCES = tuple(Path(__file__).resolve().parent / "java" / name
                 for name in ("LinkLogStore.java", "PutIfAbsentLogStore.java"))


def _pyspark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).exists():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        raise SparkSetupError(
            f"'{name}' was not found: sbqueue compiles its local Delta log store once per "
            "machine and needs a JDK 17 (for example 'apt-get install openjdk-17-jdk-headless')."
        )
    return found


def _delta_storage_jar(ivy_dir: Path) -> Path | None:
    found = sorted((ivy_dir / "jars").glob("io.delta_delta-storage-*.jar"))
    return found[-1] if found else None


def _resolve_packages(conf: dict[str, str]) -> None:
    """Let Spark's own Ivy resolution fetch the Delta jars, without starting a SparkContext."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "resolve.py"
        script.write_text("")
        command = [
            str(_pyspark_home() / "bin" / "spark-submit"),
            "--packages", conf["spark.jars.packages"],
            "--conf", f"spark.jars.ivy={conf['spark.jars.ivy']}",
            "--conf", f"spark.jars.ivySettings={conf['spark.jars.ivySettings']}",
            str(script),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise SparkSetupError(
            f"The first download of the Delta jars ({conf['spark.jars.packages']}) failed. "
            "Spark fetches them from Maven Central into "
            f"{conf['spark.jars.ivy']}; check the network or proxy, or put them in the local "
            "Maven repository with 'mvn dependency:get -Dartifact="
            f"{conf['spark.jars.packages']}', then retry. Spark said:\n{tail}"
        )


def ensure_logstore_jar(conf: dict[str, str]) -> Path:
    """Return the path of the log store jar, resolving and compiling it if needed."""
    key = hashlib.sha256(b"".join(p.read_bytes() for p in _SOURCES)
                         + conf["spark.jars.packages"].encode()).hexdigest()
    jar = cache_dir() / "jars" / f"sbqueue-logstore-{key[:16]}.jar"
    if jar.exists():
        return jar
    ivy_dir = Path(conf["spark.jars.ivy"])
    storage = _delta_storage_jar(ivy_dir)
    if storage is None:
        _resolve_packages(conf)
        storage = _delta_storage_jar(ivy_dir)
        if storage is None:
            raise SparkSetupError(f"Ivy finished but no delta-storage jar is in {ivy_dir}/jars.")
    classpath = os.pathsep.join([str(storage), str(_pyspark_home() / "jars" / "*")])
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        result = subprocess.run(
            [_tool("javac"), "--release", "17", "-nowarn", "-cp", classpath,
             "-d", tmp, *(str(p) for p in _SOURCES)],
            capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise SparkSetupError(f"Compiling the local log store failed:\n{result.stderr}")
        staged = jar.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(staged, "w") as archive:
            for path in sorted(Path(tmp).rglob("*.class")):
                archive.write(path, path.relative_to(tmp).as_posix())
        os.replace(staged, jar)  # several processes may build at once: last rename wins
    return jar
