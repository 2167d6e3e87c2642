//! The monthly report bundle: one folder a manager can open, zip or mail.
//!
//! [`write_bundle`] writes `index.html` (one page: inline CSS, no scripts,
//! nothing from elsewhere), `summary.md` (the same content in Markdown),
//! `<name>.csv` for every table, and the marker [`MARKER`] that tells a
//! later run the folder is a report's ([`out_dir_state`]), so a report never
//! overwrites a folder that is not one unless told. Charts appear as
//! relative `<img src="fleet-state.png">` links ([`Assets::Linked`]) or
//! embedded in the page ([`Assets::Embedded`]: one file to mail); the caller
//! renders them into the same folder with the [chart functions](crate::chart)
//! before (embedded) or before or after (linked): this module never draws.
//! The caller also computes every figure and gives every table cell as its
//! CSV holds it; the page and the summary title each column and format each
//! cell by the column's entry in [`COLUMNS`] (`$1,234.56`, `1,234.5`).
//!
//! What a report says ([`Report`], [`TableData`]) is defined in `report.rs`
//! and `table.rs`, which the renderers beside them read without importing
//! this module back; `columns.rs` holds the columns' titles and kinds.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};

use crate::chart::ChartName;

mod columns;
mod csv_table;
mod html;
mod markdown;
mod report;
mod table;

pub use columns::{COLUMNS, Column, ColumnKind, KIND_KEY, column};
pub use report::{Figure, Report, Section};
pub use table::{CsvLines, TableData};

/// The file every report folder holds: it marks the folder as an apron
/// report's, whose files a later report may replace.
pub const MARKER: &str = ".apron-report";

/// What the marker file says, for a person who finds it.
const MARKER_TEXT: &str = "This folder holds a report written by apron (index.html). \
                           A later `apron report` or `apron demo` into it replaces its files.\n";

/// How `index.html` refers to the files beside it: the chart PNGs and the
/// table CSVs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Assets {
    /// Relative links (`<img src="fleet-state.png">`): the page shows its
    /// charts when the folder is opened or served whole.
    #[default]
    Linked,
    /// Embedded as `data:` URLs (`data:image/png;base64,…`, and each CSV
    /// link likewise): `index.html` alone is the whole report, one file to
    /// mail. The PNGs and CSVs are still written beside it.
    Embedded,
}

/// What a folder a report is to be written into holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutDirState {
    /// Nothing is there: the folder will be created.
    Missing,
    /// An empty folder.
    Empty,
    /// A folder holding [`MARKER`]: an earlier report.
    Report,
    /// A folder holding other things and no marker.
    Other,
    /// Something that is not a folder.
    NotAFolder,
}

/// What `out_dir` holds, for deciding whether to write a report into it.
/// Fails only when it exists and cannot be read.
pub fn out_dir_state(out_dir: &Path) -> io::Result<OutDirState> {
    let meta = match std::fs::metadata(out_dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(OutDirState::Missing),
        Err(e) => return Err(e),
    };
    if !meta.is_dir() {
        return Ok(OutDirState::NotAFolder);
    }
    if out_dir.join(MARKER).is_file() {
        return Ok(OutDirState::Report);
    }
    let mut entries = std::fs::read_dir(out_dir)?;
    Ok(if entries.next().is_none() { OutDirState::Empty } else { OutDirState::Other })
}

/// Creates `out_dir` if needed and writes [`MARKER`] into it, for a caller
/// that writes files of its own there before the bundle (`apron demo`'s
/// config).
pub fn mark_out_dir(out_dir: &Path) -> Result<(), BundleError> {
    std::fs::create_dir_all(out_dir)
        .map_err(|source| BundleError::CreateDir { path: out_dir.to_owned(), source })?;
    write(&out_dir.join(MARKER), MARKER_TEXT.as_bytes())
}

/// What [`write_bundle`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleFiles {
    /// The HTML page, `<out_dir>/index.html`.
    pub html: PathBuf,
    /// The Markdown summary, `<out_dir>/summary.md`.
    pub markdown: PathBuf,
    /// One CSV per table, in report order.
    pub csv: Vec<PathBuf>,
    /// Charts the report shows whose PNG was not in the folder when the
    /// bundle was written (the page shows a broken image until it is).
    pub missing_charts: Vec<ChartName>,
}

impl BundleFiles {
    /// Every file written: the CSVs, then `summary.md`, then `index.html`.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.csv.iter().map(PathBuf::as_path).chain([self.markdown.as_path(), self.html.as_path()])
    }
}

/// A report bundle that could not be written. Every variant names the file,
/// folder or table.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// The output folder does not exist and could not be created.
    #[error("cannot create report folder {path}")]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A table's name cannot be a CSV file stem.
    #[error(
        "table '{name}' in section '{section}' cannot be written as a CSV file: names use letters, digits, '-', '_' and '.', and do not start with '.'"
    )]
    TableName {
        /// The table's name.
        name: String,
        /// The section heading.
        section: String,
    },
    /// Two tables share a name, so one CSV would overwrite the other.
    #[error("two tables are named '{name}'; each needs its own {name}.csv")]
    DuplicateTable {
        /// The shared name.
        name: String,
    },
    /// A column has no title in [`COLUMNS`]: the page would show its raw
    /// name.
    #[error("table '{table}': column '{column}' has no title in apron_reports' COLUMNS")]
    UntitledColumn {
        /// The table's name.
        table: String,
        /// The column's name.
        column: String,
    },
    /// A row is shorter or longer than the table's columns.
    #[error("table '{table}': row {row} has {cells} cells but the table has {columns} columns")]
    RaggedRow {
        /// The table's name.
        table: String,
        /// The row number, from 1.
        row: usize,
        /// Cells in that row.
        cells: usize,
        /// Columns of the table.
        columns: usize,
    },
    /// A table could not be encoded as CSV.
    #[error("cannot write table '{table}' as CSV to {path}")]
    Csv {
        /// The table's name.
        table: String,
        /// The CSV file.
        path: PathBuf,
        /// The CSV writer's error.
        #[source]
        source: csv::Error,
    },
    /// A chart to embed could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
}

/// Writes `report` into `out_dir` (created if missing): [`MARKER`], every
/// table as `<name>.csv`, then `summary.md`, then `index.html`, each
/// replaced atomically, so re-running overwrites cleanly. With
/// [`Assets::Embedded`] the page embeds the chart PNGs found in `out_dir`
/// and the CSVs. Whether `out_dir` may be written into is the caller's
/// decision ([`out_dir_state`]). The report is checked before anything is
/// written: a bad table name, a column without a title or a ragged row
/// writes nothing. When this returns `Ok`, every listed file is complete on
/// disk.
pub fn write_bundle(report: &Report, out_dir: &Path, assets: Assets) -> Result<BundleFiles, BundleError> {
    check(report)?;
    mark_out_dir(out_dir)?;

    let mut csv = Vec::new();
    // The page's URL of each file it links, where it is not the file's name.
    let mut urls = HashMap::new();
    for table in report.sections.iter().filter_map(|s| s.table.as_ref()) {
        let path = out_dir.join(table.file_name());
        let bytes = csv_table::render(table).map_err(|source| BundleError::Csv {
            table: table.name.clone(),
            path: path.clone(),
            source,
        })?;
        write(&path, &bytes)?;
        if assets == Assets::Embedded {
            urls.insert(table.file_name(), data_url("text/csv;charset=utf-8", &bytes));
        }
        csv.push(path);
    }
    let markdown = out_dir.join("summary.md");
    write(&markdown, markdown::render(report).as_bytes())?;

    let mut missing_charts = Vec::new();
    for chart in report.sections.iter().filter_map(|s| s.chart) {
        let path = out_dir.join(chart.file_name());
        match assets {
            Assets::Linked if path.is_file() => {}
            Assets::Embedded => match std::fs::read(&path) {
                Ok(png) => {
                    urls.insert(chart.file_name(), data_url("image/png", &png));
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing_charts.push(chart),
                Err(source) => return Err(BundleError::Read { path, source }),
            },
            Assets::Linked => missing_charts.push(chart),
        }
    }
    let footer = match assets {
        Assets::Linked => "Made by apron. Charts are PNG files beside this page; tables are also CSV files.",
        Assets::Embedded => {
            "Made by apron. This page holds its charts and its tables' CSV files;              they were also written as files beside it."
        }
    };
    let html = out_dir.join("index.html");
    write(&html, html::render(report, &urls, footer).as_bytes())?;
    Ok(BundleFiles { html, markdown, csv, missing_charts })
}

/// `bytes` as a `data:` URL of `mime`, base64-encoded.
fn data_url(mime: &str, bytes: &[u8]) -> String {
    use base64::Engine as _;
    format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), BundleError> {
    apron_files::replace::write(path, bytes)
        .map_err(|source| BundleError::Write { path: path.to_owned(), source })
}

/// Table names are file stems and unique; every column has a title; rows
/// match their columns.
fn check(report: &Report) -> Result<(), BundleError> {
    let mut names = HashSet::new();
    for section in &report.sections {
        let Some(table) = &section.table else { continue };
        let name_ok = !table.name.is_empty()
            && !table.name.starts_with('.')
            && table.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !name_ok {
            return Err(BundleError::TableName {
                name: table.name.clone(),
                section: section.heading.clone(),
            });
        }
        if !names.insert(table.name.as_str()) {
            return Err(BundleError::DuplicateTable { name: table.name.clone() });
        }
        if let Some(untitled) = table.columns.iter().find(|name| column(name).is_none()) {
            return Err(BundleError::UntitledColumn { table: table.name.clone(), column: untitled.clone() });
        }
        if let Some((i, row)) =
            table.rows.iter().enumerate().find(|(_, row)| row.len() != table.columns.len())
        {
            return Err(BundleError::RaggedRow {
                table: table.name.clone(),
                row: i + 1,
                cells: row.len(),
                columns: table.columns.len(),
            });
        }
        if let Some((i, cells)) = table.rest.ragged(table.columns.len()) {
            return Err(BundleError::RaggedRow {
                table: table.name.clone(),
                row: table.rows.len() + i + 1,
                cells,
                columns: table.columns.len(),
            });
        }
        // The numbers, when given, are a number (or none) per cell of each
        // shown row (and of any row past those they are given for).
        if !table.numbers.is_empty() {
            let given = table.shown_rows().len().max(table.numbers.len()).min(table.rows.len());
            let numbers = (0..given).map(|i| table.numbers.get(i).map_or(0, Vec::len));
            if let Some((i, cells)) = numbers.enumerate().find(|&(_, n)| n != table.columns.len()) {
                return Err(BundleError::RaggedRow {
                    table: table.name.clone(),
                    row: i + 1,
                    cells,
                    columns: table.columns.len(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
