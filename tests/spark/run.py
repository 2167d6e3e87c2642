"""Runs apron's generated SQL on Apache Spark in local mode, for tests/spark.rs.

    python run.py OUT.json DDL.sql NAME=QUERY.sql ...

Feeds the statements of DDL.sql to Spark one by one (split at a `;` ending
a line, as a script would), then runs each query and writes its rows, by
NAME, to OUT.json, with the partition values Spark read and its timings.
"""

import json
import sys
import time

from pyspark.sql import SparkSession


def statements(text):
    """The `;`-ended statements of `text`, comment lines left out."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";").strip()]


def main():
    out, ddl, *named = sys.argv[1:]
    began = time.time()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("apron-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    started = time.time()
    for statement in statements(open(ddl).read()):
        spark.sql(statement.rstrip(";")).collect()
    result = {"timings": {"start_s": started - began, "ddl_s": time.time() - started}}
    hosts = spark.sql("SELECT DISTINCT host, typeof(host) AS type FROM apron.gpu_minutes ORDER BY host").collect()
    result["hosts"] = [[r["host"], r["type"]] for r in hosts]
    for item in named:
        name, path = item.split("=", 1)
        [query] = statements(open(path).read())
        t = time.time()
        rows = spark.sql(query.rstrip(";")).collect()
        result["timings"][name + "_s"] = time.time() - t
        result[name] = [row.asDict() for row in rows]
    spark.stop()
    with open(out, "w") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
