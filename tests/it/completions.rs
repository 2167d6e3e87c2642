//! End to end: the completion scripts `apron completions SHELL` prints
//! offer what a command takes, run in the shell itself: in bash, `apron
//! chart <TAB>` offers the chart names.

use std::process::{Command, Stdio};

use apron_tests::{bin, stdout_of};

/// What bash's completion of `apron` offers for `words` (the last is the
/// word being completed), with the script `apron completions bash` prints.
fn bash_offers(words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("apron.bash");
    std::fs::write(&script, stdout_of(Command::new(bin("apron")).args(["completions", "bash"])))
        .expect("write the script");
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let driver = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\nCOMP_LINE=\"${{COMP_WORDS[*]}}\"\nCOMP_POINT=${{#COMP_LINE}}\n\
         _apron apron '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        quoted.join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &driver])
        .stdin(Stdio::null())
        .output()
        .expect("bash runs");
    assert!(out.status.success(), "bash: {}", String::from_utf8_lossy(&out.stderr));
    let mut offered: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    offered.sort();
    offered
}

#[test]
fn bash_completes_the_chart_names() {
    let mut names = ["fleet-state", "idle-cost", "team-spend", "hour-of-week", "gpu-days", "power"];
    names.sort_unstable();
    // Nothing typed: the names, beside the flags (`--out`, …).
    let offered = bash_offers(&["apron", "chart", ""]);
    let values: Vec<&String> = offered.iter().filter(|w| !w.starts_with('-')).collect();
    assert_eq!(values, names, "{offered:?}");
    assert_eq!(bash_offers(&["apron", "chart", "ho"]), ["hour-of-week"]);
    assert_eq!(bash_offers(&["apron", "chart", "p"]), ["power"]);
    // After the name, the flags.
    assert!(bash_offers(&["apron", "chart", "power", "--"]).contains(&"--out".to_owned()));
}
