"""SparkStart imports pyspark whole on the caller's thread before its own thread starts: pyspark imports itself in a
cycle, and two threads importing it at once could each get the other's half-made module (`make run` once failed
with "cannot import name 'SQLContext' from partially initialized module 'pyspark.sql'")."""
from __future__ import annotations

import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import sys
    from rbench import spark

    assert "pyspark" not in sys.modules, "a fresh interpreter"
    seen = {}
    spark._launch = lambda options, daemons=None, mark=None: None            # no JVM for this probe
    spark.SparkStart._start = lambda self: seen.update(sql=sys.modules.get("pyspark.sql"))
    start = spark.SparkStart("local[1]", app_name="probe")
    start.start()
    start._thread.join(5)
    sql = seen["sql"]
    assert sql is not None and hasattr(sql, "SparkSession") and hasattr(sql, "SQLContext"), sql
    print("ok")
""")


def test_pyspark_is_imported_whole_before_the_start_thread_runs() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
