//! The first run, as a new user makes it: `apron demo` (the README's main
//! command, from the binary cargo built), then the commands the demo ends
//! with, run as printed, then every `sh` example of the README and of the
//! book's chapters (`docs/src/**/*.md`), run as written in the demo's folder.
//!
//! The layout is an installed binary's, not a clone's: no `queries/` beside
//! the demo's folder `apron-demo/`, so the README's SQL examples must take
//! a report's SQL from the binary (`apron sql --show NAME`). A block preceded by
//! `<!-- not run by tests/it/first_run.rs: REASON -->` is skipped (it needs a
//! GPU node, a bucket, the hosts, or installs something); every other `sh`
//! block runs with `sh -e`, in `apron-demo/` (or from the folder above when
//! it starts with `cd apron-demo`), with `apron` on `PATH`, and must exit 0
//! with nothing on stderr but the reports' header lines.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use apron_tests::bin;

/// The marker that skips the block under it.
const NOT_RUN: &str = "<!-- not run by tests/it/first_run.rs:";

/// One `sh` block of a document: the line its fence is on, and its text.
#[derive(Debug)]
struct Block {
    line: usize,
    text: String,
}

/// A document's `sh` blocks, without the ones marked [`NOT_RUN`].
fn runnable_blocks(readme: &str) -> (Vec<Block>, usize) {
    let mut blocks = Vec::new();
    let mut skipped = 0;
    let mut lines = readme.lines().enumerate().peekable();
    let mut previous = "";
    while let Some((n, line)) = lines.next() {
        let Some(lang) = line.strip_prefix("```") else {
            if !line.trim().is_empty() {
                previous = line;
            }
            continue;
        };
        let mut text = String::new();
        for (_, inner) in lines.by_ref() {
            if inner.starts_with("```") {
                break;
            }
            text.push_str(inner);
            text.push('\n');
        }
        if lang.trim() == "sh" {
            if previous.trim_start().starts_with(NOT_RUN) {
                skipped += 1;
            } else {
                blocks.push(Block { line: n + 1, text });
            }
        }
        previous = "";
    }
    (blocks, skipped)
}

/// Runs `script` with `sh -e` in `dir`, with the folder of the `apron`
/// under test first on `PATH`.
fn sh(script: &str, dir: &Path) -> Output {
    let apron = bin("apron");
    let bin_dir = apron.parent().expect("the binary's folder");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin_dir.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    Command::new("sh")
        .args(["-ec", script])
        .current_dir(dir)
        .env("PATH", std::env::join_paths(paths).expect("a PATH"))
        .env_remove("APRON_DATA")
        .env_remove("APRON_MEMORY_LIMIT")
        .output()
        .expect("sh runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A temporary folder for the demo to write in, with nothing of the
/// repository beside it (no `queries/`: the binary carries its SQL), and
/// the repository.
fn installed_layout() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository").to_path_buf();
    (tmp, repo)
}

/// The README, then the book's chapters (`docs/src/**/*.md`) in path
/// order: the documents whose examples run, named from the repository.
fn documents(repo: &Path) -> Vec<(String, PathBuf)> {
    let mut chapters = Vec::new();
    let mut folders = vec![repo.join("docs/src")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("reads the book's folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                chapters.push(path);
            }
        }
    }
    chapters.sort();
    assert!(!chapters.is_empty(), "the book's chapters in {}", repo.join("docs/src").display());
    std::iter::once(repo.join("README.md"))
        .chain(chapters)
        .map(|path| {
            let name = path.strip_prefix(repo).expect("in the repository").display().to_string();
            (name, path)
        })
        .collect()
}

#[test]
fn the_demo_then_its_commands_then_every_readme_example_run_as_written() {
    let (tmp, repo) = installed_layout();
    // The README's main command is `cargo run -p apron-analyze -- demo`:
    // the same binary, run from the clone's top, shortened to three days.
    let demo = Command::new(bin("apron"))
        .args(["demo", "--days", "3"])
        .current_dir(tmp.path())
        .env_remove("APRON_DATA")
        .output()
        .expect("apron demo runs");
    let stdout = text(&demo.stdout);
    assert!(demo.status.success(), "apron demo: {stdout}\n{}", text(&demo.stderr));
    let demo_dir = tmp.path().join("apron-demo");
    assert!(demo_dir.join("data/gpu_minutes").is_dir(), "the demo's data is kept in apron-demo/data");
    assert!(stdout.contains("November 2026"), "the demo's month: {stdout}");

    // The closing commands, as printed: the binary by its full path (it is
    // not on the test's PATH), in the demo's folder.
    let explore: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Explore the data"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(str::trim)
        .collect();
    assert!(explore.len() >= 4, "commands to explore the data: {stdout}");
    assert_eq!(explore[0], "cd apron-demo");
    let apron = bin("apron").canonicalize().expect("the binary");
    for command in &explore[1..] {
        assert!(command.starts_with(&format!("{} ", apron.display())), "the binary's real path: {command}");
    }
    for (i, command) in explore[1..].iter().enumerate() {
        let script = format!("{}\n{command}", explore[0]);
        let out = Command::new("sh")
            .args(["-ec", &script])
            .current_dir(tmp.path())
            .env_remove("APRON_DATA")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("sh runs");
        assert!(out.status.success(), "{command}: {}\n{}", text(&out.stdout), text(&out.stderr));
        if i == 0 {
            // `spend --month 2026-11` with the demo's config: priced teams.
            let spend = text(&out.stdout);
            assert!(spend.contains("Period:   2026-11-01 00:00 – 2026-12-01 00:00 UTC"), "{spend}");
            assert!(spend.contains(&format!("Config:   {}", Path::new("apron.toml").display())), "{spend}");
            assert!(spend.contains("| nlp "), "the demo config's teams: {spend}");
        }
    }

    // Every example of the README and of the book.
    let mut blocks = Vec::new();
    let mut skipped = 0;
    for (name, path) in documents(&repo) {
        let text = std::fs::read_to_string(&path).expect("reads a document");
        let (found, marked) = runnable_blocks(&text);
        blocks.extend(found.into_iter().map(|block| (name.clone(), block)));
        skipped += marked;
    }
    assert!(blocks.len() >= 7, "runnable README blocks: {}", blocks.len());
    assert!(skipped >= 5, "skipped README blocks: {skipped}");
    let mut apron_commands = 0;
    for (file, block) in &blocks {
        let (dir, script) = match block.text.strip_prefix("cd apron-demo") {
            Some(_) => (tmp.path(), block.text.clone()),
            None => (demo_dir.as_path(), block.text.clone()),
        };
        apron_commands += script.lines().filter(|l| l.trim_start().starts_with("apron ")).count();
        let out = sh(&script, dir);
        let stderr = text(&out.stderr);
        assert!(
            out.status.success(),
            "{file}:{}: the block failed ({}):\n{}\nstdout:\n{}\nstderr:\n{stderr}",
            block.line,
            out.status,
            block.text,
            text(&out.stdout)
        );
        assert!(!stderr.contains("error"), "{file}:{}: {stderr}", block.line);
    }
    assert!(apron_commands >= 15, "apron commands run from the README: {apron_commands}");
    // What the examples wrote is where they said.
    for written in
        ["reports/2026-11/index.html", "idle-cost.png", "windows.cron", "zombies.sh", "apron_config"]
    {
        assert!(demo_dir.join(written).exists(), "{written} written by the README's examples");
    }
}

#[test]
fn blocks_are_found_and_marked_ones_skipped() {
    let readme = "text\n\n```sh\napron spend\n```\n\n<!-- not run by tests/it/first_run.rs: a bucket -->\n\
                  ```sh\napron --data s3://b sql x\n```\n\n```text\napron sql\n```\n";
    let (blocks, skipped) = runnable_blocks(readme);
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].line, 3);
    assert_eq!(blocks[0].text, "apron spend\n");
    assert_eq!(skipped, 1);
}
