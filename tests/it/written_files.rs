//! End to end: every file `apron` writes by name (`export-config`,
//! `report`, `demo`'s config, `chart`, `sql --out`, `man-pages`) replaces
//! its file through a new temporary file created beside it: a symbolic
//! link planted at a temporary name apron once used, or at the file itself,
//! is never written through (the file it points to keeps its bytes and its
//! mode), and the modes are those people expect: a new file gets `0666`
//! less the umask (real umasks, set in the child process), a file replaced
//! keeps its mode.
//!
//! Runs on the hand-built fleet of `apron_tests::scenario` (November 2026).

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use apron_tests::scenario::{FROM_TO, Fixture};

/// The config tables `apron export-config` writes, one folder each.
const TABLES: [&str; 3] = ["apron_settings", "apron_gpu_rates", "apron_team_rules"];

/// `apron --data DATA --config CONFIG ARGS…` run with `umask`.
fn apron_umask(fx: &Fixture, umask: libc::mode_t, args: &[&str]) -> Output {
    let (data, config) = (path_arg(&fx.data), path_arg(&fx.config));
    apron_bare(umask, &[&["--data", data, "--config", config][..], args].concat())
}

/// `apron ARGS…` run with `umask`, for the commands that read no data.
fn apron_bare(umask: libc::mode_t, args: &[&str]) -> Output {
    let mut command = Command::new(apron_tests::bin("apron"));
    command.args(args).env_remove("APRON_DATA").env_remove("APRON_LOG").stdin(Stdio::null());
    // SAFETY: umask(2) is async-signal-safe and sets only the child's mask.
    unsafe {
        command.pre_exec(move || {
            libc::umask(umask);
            Ok(())
        });
    }
    command.output().expect("apron runs")
}

/// `apron --config CONFIG export-config --out OUT` run with `umask`.
fn export_config(fx: &Fixture, umask: libc::mode_t, out: &Path) -> Output {
    apron_bare(umask, &["--config", path_arg(&fx.config), "export-config", "--out", path_arg(out)])
}

fn succeed(out: &Output, what: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn path_arg(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).expect("stat").permissions().mode() & 0o7777
}

/// Files an attacker would like apron to overwrite, each with its own
/// bytes and mode `0644`, and symbolic links to them.
struct Victims {
    dir: PathBuf,
    planted: Vec<(PathBuf, PathBuf)>,
}

impl Victims {
    fn new(dir: &Path) -> Victims {
        let dir = dir.join("victims");
        fs::create_dir(&dir).expect("mkdir");
        Victims { dir, planted: Vec::new() }
    }

    /// A symbolic link at `link` to a new victim file.
    fn plant(&mut self, link: &Path) {
        let victim = self.dir.join(format!("victim-{}", self.planted.len()));
        fs::write(&victim, format!("precious {}\n", self.planted.len())).expect("write the victim");
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).expect("chmod");
        symlink(&victim, link).expect("plant the link");
        self.planted.push((link.to_path_buf(), victim));
    }

    /// Every victim holds its bytes and mode still.
    fn untouched(&self) {
        assert!(!self.planted.is_empty());
        for (k, (link, victim)) in self.planted.iter().enumerate() {
            let bytes = fs::read(victim).expect("read the victim");
            let head = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
            assert!(
                bytes == format!("precious {k}\n").as_bytes(),
                "{} was written through: its victim holds {} bytes now, starting {head:?}",
                link.display(),
                bytes.len()
            );
            assert_eq!(mode(victim), 0o644, "{}'s victim changed mode", link.display());
        }
    }
}

/// `apron export-config` once wrote each table to the fixed name
/// `.NAME.parquet.tmp` with `File::create`, following a link planted there
/// into any file the user may write; and a link at the table's own name.
#[test]
fn export_config_never_writes_through_a_planted_link() {
    let fx = Fixture::new();
    let out = fx.dir.path().join("tables");
    let mut victims = Victims::new(fx.dir.path());
    for name in TABLES {
        let folder = out.join(name);
        fs::create_dir_all(&folder).expect("mkdir");
        victims.plant(&folder.join(format!(".{name}.parquet.tmp")));
    }
    let run = export_config(&fx, 0o022, &out);
    let said = succeed(&run, "export-config with links at the temporary names");
    victims.untouched();
    for name in TABLES {
        let file = out.join(name).join(format!("{name}.parquet"));
        assert!(said.contains(&format!("wrote {}", file.display())), "{said}");
        assert!(fs::symlink_metadata(&file).expect("stat").is_file(), "{}", file.display());
        assert!(fs::read(&file).expect("read").starts_with(b"PAR1"), "{}", file.display());
        // Link the table's own name to a victim: the link is replaced.
        fs::remove_file(&file).expect("remove");
        victims.plant(&file);
    }
    let run = export_config(&fx, 0o022, &out);
    succeed(&run, "export-config with links at the tables' names");
    victims.untouched();
    for name in TABLES {
        let file = out.join(name).join(format!("{name}.parquet"));
        assert!(fs::symlink_metadata(&file).expect("stat").is_file(), "{}", file.display());
        assert_eq!(mode(&file), 0o644, "a new file under umask 022");
    }
    // Under umask 027 new files are 0640; the ones replaced keep theirs.
    let fresh = fx.dir.path().join("fresh");
    succeed(&export_config(&fx, 0o027, &fresh), "umask 027");
    for name in TABLES {
        assert_eq!(mode(&fresh.join(name).join(format!("{name}.parquet"))), 0o640, "{name} under umask 027");
    }
}

/// The report's files, the demo's config, a chart, `sql --out` and the
/// manual pages, each with a link planted at its own name.
#[test]
fn no_written_file_follows_a_link_planted_at_its_name() {
    let fx = Fixture::new();
    let mut victims = Victims::new(fx.dir.path());

    // The report: the names one run writes, linked in a second folder.
    let first = fx.dir.path().join("first");
    succeed(&apron_umask(&fx, 0o022, &["report", "--month", "2026-11", "--out", path_arg(&first)]), "report");
    let names: Vec<String> = apron_tests::files_under(&first)
        .iter()
        .map(|p| p.strip_prefix(&first).expect("under").to_string_lossy().into_owned())
        .collect();
    for wanted in [".apron-report", "index.html", "summary.md", "team-spend.png"] {
        assert!(names.iter().any(|n| n == wanted), "{wanted} in {names:?}");
    }
    assert!(names.iter().any(|n| n.ends_with(".csv")), "{names:?}");
    let second = fx.dir.path().join("second");
    fs::create_dir(&second).expect("mkdir");
    for name in &names {
        victims.plant(&second.join(name));
    }
    succeed(
        &apron_umask(&fx, 0o022, &["report", "--month", "2026-11", "--out", path_arg(&second)]),
        "report into links",
    );
    for name in &names {
        let path = second.join(name);
        assert!(fs::symlink_metadata(&path).expect("stat").is_file(), "{name} is a file now");
        assert_eq!(fs::read(&path).expect("read"), fs::read(first.join(name)).expect("read"), "{name}");
    }

    // A chart, and a result file.
    let chart = fx.dir.path().join("spend.png");
    victims.plant(&chart);
    let mut args = vec!["chart", "team-spend", "--force", "--out", path_arg(&chart)];
    args.extend(FROM_TO);
    succeed(&apron_umask(&fx, 0o022, &args), "chart");
    assert!(fs::read(&chart).expect("read").starts_with(b"\x89PNG"));
    let result = fx.dir.path().join("r.csv");
    victims.plant(&result);
    succeed(&apron_umask(&fx, 0o022, &["sql", "SELECT 1 AS one", "--out", path_arg(&result)]), "sql --out");
    assert_eq!(fs::read_to_string(&result).expect("read"), "one\n1\n");

    // The manual pages.
    let pages = fx.dir.path().join("man");
    fs::create_dir(&pages).expect("mkdir");
    victims.plant(&pages.join("apron.1"));
    victims.plant(&pages.join("apron-spend.1"));
    succeed(&apron_bare(0o022, &["man-pages", "--out", path_arg(&pages)]), "man-pages");
    assert!(fs::read_to_string(pages.join("apron-spend.1")).expect("read").starts_with(".ie"));

    // The demo's config, in a report folder of an earlier demo.
    let demo = fx.dir.path().join("demo");
    fs::create_dir(&demo).expect("mkdir");
    fs::write(demo.join(".apron-report"), b"an earlier report\n").expect("mark");
    victims.plant(&demo.join("apron.toml"));
    let run = Command::new(apron_tests::bin("apron"))
        .args(["demo", "--month", "2026-10", "--days", "1", "--hosts", "1", "--out"])
        .arg(&demo)
        .env_remove("APRON_DATA")
        .stdin(Stdio::null())
        .output()
        .expect("apron runs");
    succeed(&run, "demo");
    assert!(fs::read_to_string(demo.join("apron.toml")).expect("read").contains("[[gpu_cost]]"));

    victims.untouched();
}

/// Report files once were forced to `0644`, whatever the umask; `sql
/// --out` over a `0600` file left it `0644`.
#[test]
fn new_files_follow_the_umask_and_replaced_files_keep_their_mode() {
    let fx = Fixture::new();
    let report = |umask: libc::mode_t, out: &Path| {
        succeed(
            &apron_umask(&fx, umask, &["report", "--month", "2026-11", "--out", path_arg(out)]),
            "report",
        );
        let files = apron_tests::files_under(out);
        assert!(files.len() > 10, "{files:?}");
        files
    };
    for (umask, want) in [(0o077, 0o600), (0o022, 0o644), (0o027, 0o640)] {
        let out = fx.dir.path().join(format!("report-{umask:o}"));
        for file in report(umask, &out) {
            assert_eq!(mode(&file), want, "{} under umask {umask:03o}", file.display());
        }
    }
    // Narrowed by hand, then written again under umask 022: kept.
    let out = fx.dir.path().join("report-kept");
    let files = report(0o022, &out);
    for file in &files {
        fs::set_permissions(file, fs::Permissions::from_mode(0o640)).expect("chmod");
    }
    report(0o022, &out);
    for file in &files {
        assert_eq!(mode(file), 0o640, "{} keeps its mode", file.display());
    }

    let sql = |umask: libc::mode_t, path: &Path| {
        succeed(&apron_umask(&fx, umask, &["sql", "SELECT 2 AS two", "--out", path_arg(path)]), "sql --out");
        assert_eq!(fs::read_to_string(path).expect("read"), "two\n2\n");
        mode(path)
    };
    for (umask, want) in [(0o077, 0o600), (0o022, 0o644)] {
        let path = fx.dir.path().join(format!("new-{umask:o}.csv"));
        assert_eq!(sql(umask, &path), want, "a new file under umask {umask:03o}");
    }
    let private = fx.dir.path().join("private.csv");
    fs::write(&private, "secret\n").expect("write");
    fs::set_permissions(&private, fs::Permissions::from_mode(0o600)).expect("chmod");
    assert_eq!(sql(0o022, &private), 0o600, "a 0600 file stays 0600");
    let shared = fx.dir.path().join("shared.csv");
    fs::write(&shared, "shared\n").expect("write");
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o664)).expect("chmod");
    assert_eq!(sql(0o077, &shared), 0o664, "a 0664 file stays 0664 under umask 077");
}
