//! End-to-end tests of the memory limit every `apron` command runs under
//! (`--memory-limit`, `$APRON_MEMORY_LIMIT`): the real binary on a day of a
//! simulated host (8 GPUs at 1 s: 691,200 `gpu_samples` rows) written by
//! `apron-recorder simulate`.
//!
//! - A sort of every row past a small limit spills to `$TMPDIR` and prints
//!   the same rows as without the limit; with no `$TMPDIR` to spill to, the
//!   same command fails, which shows it did need the disk.
//! - A hash join, whose build side cannot spill, fails under the limit with
//!   the one line naming the limit and how to raise it, exit code 2.
//! - Bad sizes are one line naming the flag and the value.
//! - `$APRON_MEMORY_LIMIT` sets the limit; `--memory-limit` wins over it.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

/// A limit the sort below does not fit in, nor the join's build side.
const SMALL: &str = "16M";

/// Every row of `gpu_samples`, sorted on columns the files are not sorted
/// by, so the whole table is held or spilled before the first row is out.
const SORT_ALL: &str =
    "SELECT gpu_uuid, ts, gpu_util_pct, power_mw FROM gpu_samples ORDER BY power_mw, ts, gpu_uuid";

/// An equi-join of every process sample to its GPU's sample: DataFusion
/// builds a hash table of one side in memory, which cannot spill.
const JOIN_ALL: &str = "SELECT count(*) AS n FROM gpu_samples g \
     JOIN proc_samples p ON g.gpu_uuid = p.gpu_uuid AND g.ts = p.ts";

/// A simulated day of one host of 8 GPUs, and a folder to use as `$TMPDIR`.
struct Day {
    dir: TempDir,
}

impl Day {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let data = dir.path().join("data");
        let out = Command::new(apron_tests::bin("apron-recorder"))
            .args(["simulate", "--gpus", "8", "--days", "1", "--start", "2026-11-02", "--data"])
            .arg(&data)
            .env_remove("APRON_DATA")
            .stdin(Stdio::null())
            .output()
            .expect("apron-recorder runs");
        assert!(out.status.success(), "simulate failed: {}", String::from_utf8_lossy(&out.stderr));
        std::fs::create_dir(dir.path().join("tmp")).expect("make the spill folder");
        Day { dir }
    }

    fn data(&self) -> std::path::PathBuf {
        self.dir.path().join("data")
    }

    fn tmp(&self) -> std::path::PathBuf {
        self.dir.path().join("tmp")
    }

    /// `apron --data DATA --format csv ARGS…` with `TMPDIR=tmp`, the
    /// environment's `APRON_MEMORY_LIMIT` replaced by `env_limit` (or
    /// removed).
    fn apron(&self, tmp: &Path, env_limit: Option<&str>, args: &[&str]) -> Output {
        let mut cmd = Command::new(apron_tests::bin("apron"));
        cmd.arg("--data").arg(self.data()).args(["--format", "csv"]).args(args);
        cmd.env("TMPDIR", tmp).env_remove("APRON_LOG").env_remove("APRON_MEMORY_LIMIT");
        if let Some(limit) = env_limit {
            cmd.env("APRON_MEMORY_LIMIT", limit);
        }
        cmd.stdin(Stdio::null()).output().expect("apron runs")
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// The stdout of a run that must succeed.
fn succeed(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what} failed: {}", text(&out.stderr));
    text(&out.stdout)
}

/// The one line of stderr of a run that must fail with exit code 2 and
/// print nothing.
fn fail_one_line(out: &Output, what: &str) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: exit code; stderr: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: one line, got: {err}");
    err.trim_end().to_owned()
}

#[test]
fn a_sort_past_the_limit_spills_to_tmpdir_and_gives_the_same_rows() {
    let day = Day::new();
    let unlimited = succeed(day.apron(&day.tmp(), None, &["--memory-limit", "2G", "sql", SORT_ALL]), "2G");
    // 691,200 rows: 8 GPUs × 86,400 s, and the header.
    assert_eq!(unlimited.lines().count(), 8 * 86_400 + 1);
    let powers: Vec<i64> =
        unlimited.lines().skip(1).map(|l| l.rsplit(',').next().unwrap_or("").parse().unwrap_or(-1)).collect();
    assert!(powers.iter().all(|p| *p >= 0), "every sample has a power reading");
    assert!(powers.windows(2).all(|w| w[0] <= w[1]), "sorted by power_mw");

    let spilled = succeed(day.apron(&day.tmp(), None, &["--memory-limit", SMALL, "sql", SORT_ALL]), SMALL);
    assert!(spilled == unlimited, "the rows sorted under {SMALL} differ from those sorted under 2G");
    // The spill folder went with the command.
    assert_eq!(apron_tests::files_under(&day.tmp()), Vec::<std::path::PathBuf>::new());
    assert_eq!(std::fs::read_dir(day.tmp()).expect("the spill folder").count(), 0);

    // With nowhere to spill, the same sort under the same limit fails, so
    // it did need the disk; the line names the folder and the limit.
    let nowhere = day.dir.path().join("no-such-folder");
    let out = day.apron(&nowhere, None, &["--memory-limit", SMALL, "sql", SORT_ALL]);
    let line = fail_one_line(&out, "sort with no spill folder");
    let want = format!(
        "error: cannot spill the query to disk under {} (TMPDIR chooses the folder; --memory-limit or \
         APRON_MEMORY_LIMIT raises the limit of 16.0 MiB): ",
        nowhere.display()
    );
    assert!(line.starts_with(&want), "{line}");
    assert!(out.stdout.is_empty(), "no rows before the failure");

    // APRON_MEMORY_LIMIT sets the limit: the same failure, under 16 MiB…
    let out = day.apron(&nowhere, Some(SMALL), &["sql", SORT_ALL]);
    assert!(fail_one_line(&out, "env limit, no spill folder").starts_with(&want));
    // …and --memory-limit wins over it: 2 GiB holds the sort without disk.
    let flag = succeed(day.apron(&nowhere, Some(SMALL), &["--memory-limit", "2G", "sql", SORT_ALL]), "flag");
    assert!(flag == unlimited, "the rows sorted under --memory-limit 2G differ");
}

#[test]
fn a_hash_join_past_the_limit_fails_in_one_line_naming_the_limit() {
    let day = Day::new();
    let want = "error: the query needs more than the memory limit of 16.0 MiB \
                (--memory-limit or APRON_MEMORY_LIMIT raises it)";
    let out = day.apron(&day.tmp(), None, &["--memory-limit", SMALL, "sql", JOIN_ALL]);
    assert_eq!(fail_one_line(&out, "join under --memory-limit"), want);
    assert!(out.stdout.is_empty());
    let out = day.apron(&day.tmp(), Some(SMALL), &["sql", JOIN_ALL]);
    assert_eq!(fail_one_line(&out, "join under APRON_MEMORY_LIMIT"), want);
    let out = day.apron(&day.tmp(), Some("1.5GiB"), &["--memory-limit", "64.5 MiB", "sql", "SELECT 1"]);
    succeed(out, "a limit in another form");

    // Under the default limit the join runs, and each process sample meets
    // its GPU's sample of the same second (the simulator writes both per
    // tick), so it counts the process samples.
    let joined = succeed(day.apron(&day.tmp(), None, &["sql", JOIN_ALL]), "join under the default");
    let procs = succeed(
        day.apron(&day.tmp(), None, &["sql", "SELECT count(*) AS n FROM proc_samples"]),
        "count the process samples",
    );
    assert_eq!(joined, procs);
    let n: u64 = procs.lines().nth(1).and_then(|l| l.parse().ok()).expect("a count");
    assert!(n > 100_000, "the join's build side is large: {n} rows");
}

#[test]
fn bad_memory_limits_are_one_line_naming_the_flag_and_the_value() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let apron = |flag: Option<&str>, env: Option<&str>| {
        let mut cmd = Command::new(apron_tests::bin("apron"));
        cmd.arg("--data").arg(dir.path());
        if let Some(value) = flag {
            // `=`, so that `-1G` is not taken for a flag of its own.
            cmd.arg(format!("--memory-limit={value}"));
        }
        cmd.args(["sql", "SELECT 1"]).env_remove("APRON_MEMORY_LIMIT").env_remove("APRON_DATA");
        if let Some(value) = env {
            cmd.env("APRON_MEMORY_LIMIT", value);
        }
        cmd.stdin(Stdio::null()).output().expect("apron runs")
    };
    let not_a_size =
        "not a size such as 512M, 2G or 1.5GiB (the value of --memory-limit or APRON_MEMORY_LIMIT)";
    for value in ["lots", "2X", "-1G", "1.2.3G", "1e9", "G", " "] {
        for (flag, env) in [(Some(value), None), (None, Some(value))] {
            let line = fail_one_line(&apron(flag, env), value);
            assert_eq!(
                line,
                format!(
                    "error: invalid value '{value}' for '--memory-limit <SIZE>': {not_a_size} (see 'apron sql --help')"
                )
            );
        }
    }
    let line = fail_one_line(&apron(Some("512"), None), "512");
    assert_eq!(
        line,
        "error: invalid value '512' for '--memory-limit <SIZE>': 512 B is below the least memory limit, \
         1 MiB (a size needs its unit: 512M, 2G) (see 'apron sql --help')"
    );
    let line = fail_one_line(&apron(Some("99999999T"), None), "huge");
    assert!(line.contains("larger than any machine's memory"), "{line}");
}
