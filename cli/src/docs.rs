//! Shell completions and manual pages, generated from the clap definition
//! the binary parses with, so they never disagree with `--help`.

use std::io;
use std::path::{Path, PathBuf};

pub use clap_complete::Shell;

/// `shell`'s completion script for `cmd` (named `binary`). Made in memory:
/// clap_complete panics when its writer fails (a closed pipe), so the caller
/// writes it and handles that.
pub fn completions(cmd: &mut clap::Command, binary: &str, shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, cmd, binary, &mut script);
    script
}

/// Writes one manual page (section 1) for `cmd` and one for each of its
/// commands, at any depth (`apron.1`, `apron-spend.1`, `apron-import-pynvml.1`),
/// into `dir`, made if missing, each replacing its file
/// ([`apron_files::replace`]: never written through a symbolic link).
/// Returns the pages written, in order.
pub fn man_pages(cmd: clap::Command, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    let mut written = Vec::new();
    write_pages(cmd, dir, &mut written)?;
    Ok(written)
}

fn write_pages(cmd: clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> io::Result<()> {
    let page = clap_mangen::Man::new(cmd.clone());
    let path = dir.join(page.get_filename());
    let mut text = Vec::new();
    page.render(&mut text)?;
    apron_files::replace::write(&path, &text)?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub.clone(), dir, written)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser, Subcommand};

    use super::*;

    /// Counts what it is told.
    #[derive(Debug, Parser)]
    #[command(name = "tool", version, about = "Counts what it is told.")]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Debug, Subcommand)]
    enum Command {
        /// Counts GPUs.
        Spend {
            /// The month.
            #[arg(long)]
            month: Option<String>,
        },
    }

    #[test]
    fn a_page_per_command_carrying_its_help() {
        let dir = std::env::temp_dir().join(format!("apron-cli-man-{}", std::process::id()));
        let pages = man_pages(Cli::command(), &dir).expect("writes");
        let names: Vec<_> = pages.iter().filter_map(|p| p.file_name()?.to_str()).collect();
        assert_eq!(names, ["tool.1", "tool-spend.1"]);
        let spend = std::fs::read_to_string(dir.join("tool-spend.1")).expect("reads");
        assert!(spend.starts_with(".ie"), "roff: {spend}");
        assert!(spend.contains("Counts GPUs"), "{spend}");
        assert!(spend.contains("\\-\\-month"), "{spend}");
        std::fs::remove_dir_all(&dir).expect("cleans up");
    }

    #[test]
    fn completions_name_the_commands_and_flags() {
        let script = String::from_utf8(completions(&mut Cli::command(), "tool", Shell::Bash)).expect("utf-8");
        assert!(script.contains("complete -F _tool"), "{script}");
        assert!(script.contains("--month") && script.contains("spend"), "{script}");
    }
}
