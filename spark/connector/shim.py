"""Build the `kafka.DefaultSource` jar (java/kafka/DefaultSource.java) against the installed
pyspark's jars with javac, once per (source, pyspark version): the class extends a
Spark-internal class, so it is compiled where it runs. The install step (the Makefile's venv
recipe) builds it; `spark.session.rafka_spark_session` builds it on first use if it is missing
(another pyspark, a changed source, an install by hand).

    python -m spark.connector.shim      # builds if needed and prints the jar's path
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = sorted((HERE / "java").rglob("*.java"))
PINNED_PYSPARK = "4.3.0"


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def cache_dir() -> Path:
    env = os.environ.get("RAFKA_SPARK_CACHE")
    if env:
        return Path(env)
    return HERE.parents[1] / ".cache" / "spark"


def jar_path() -> Path:
    import pyspark

    h = hashlib.sha256(pyspark.__version__.encode())
    for src in SOURCES:
        h.update(src.read_bytes())
    return cache_dir() / f"rafka-spark-kafka-{h.hexdigest()[:12]}.jar"


def build_jar(force: bool = False) -> Path:
    """The shim jar, compiled if missing. Safe to call from parallel processes."""
    import pyspark

    if pyspark.__version__ != PINNED_PYSPARK:
        print(
            f"warning: kafka.DefaultSource is tested with pyspark {PINNED_PYSPARK}, "
            f"this is {pyspark.__version__}",
            file=sys.stderr,
        )
    jar = jar_path()
    if jar.exists() and not force:
        return jar
    jar.parent.mkdir(parents=True, exist_ok=True)
    with open(jar.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if jar.exists() and not force:
            return jar
        with tempfile.TemporaryDirectory() as tmp:
            tmp_jar = Path(tmp) / jar.name
            compile_jar(SOURCES, Path(tmp) / "classes", tmp_jar)
            shutil.move(str(tmp_jar), jar)
        for old in jar.parent.glob("rafka-spark-kafka-*.jar"):
            if old != jar:
                old.unlink()
    return jar


def compile_jar(
    sources: Iterable[Path], classes: Path, jar: Path, resources: dict[str, str] | None = None
) -> None:
    """javac `sources` against pyspark's jars into `classes`, add `resources` (path -> text)
    and pack it all into `jar`."""
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar_tool is None:
        raise RuntimeError("javac and jar (a JDK, 17 here) are needed to build the shim")
    command = [javac, "-nowarn", "--release", "17", "-cp", f"{pyspark_jars()}/*", "-d"]
    subprocess.run([*command, str(classes), *map(str, sources)], check=True)
    for name, text in (resources or {}).items():
        (classes / name).parent.mkdir(parents=True, exist_ok=True)
        (classes / name).write_text(text)
    subprocess.run([jar_tool, "cf", str(jar), "-C", str(classes), "."], check=True)


def main() -> int:
    try:
        print(build_jar(force="--force" in sys.argv))
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print(
            f"error: Rafka's kafka.DefaultSource shim jar was not built: {e}. format('kafka') "
            "needs it where Spark's official connector is not installed: install a JDK 17 "
            "(javac, jar) and run `python -m spark.connector.shim`.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
