//! [`TableData`]: a table of cells as its CSV holds them, with the numbers
//! the caller computed, shown on the page and in the summary (titled and
//! formatted by its columns' kinds, `columns.rs`, from the numbers, not from
//! the text) and written whole as a CSV. The renderers read it; it imports
//! none of them.

use std::borrow::Cow;

use super::columns::number_in;
use crate::csv_cell::defused;

/// A table of cells as its CSV holds them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TableData {
    /// The CSV file stem, e.g. `"spend"` for `spend.csv`: letters, digits,
    /// `-`, `_` and `.`, not starting with `.`; unique within a report.
    pub name: String,
    /// Column names, as the CSV header has them (`"idle_cost"`). Each must
    /// be one of [`COLUMNS`](super::columns::COLUMNS), which gives its title
    /// on the page and how its cells read there.
    pub columns: Vec<String>,
    /// Rows of cells, each exactly as long as `columns`, as the CSV holds
    /// them: numbers as plain decimals (`1234.5`, no separators or currency),
    /// null as an empty cell.
    pub rows: Vec<Vec<String>>,
    /// The number each cell of the shown rows ([`TableData::shown_rows`])
    /// holds, row by row and cell by cell as `rows` (`None` for text, a
    /// name, a time or null), as the caller computed it: the page and the
    /// summary format these, so a number is never turned into text and
    /// read back. The rows past those shown need none (the CSV holds their
    /// text), though they may have them. Empty when the caller gives text
    /// alone (a table written by hand): then a cell's number is read from
    /// its text.
    pub numbers: Vec<Vec<Option<f64>>>,
    /// How many rows the page and the summary show (the first ones); `None`
    /// shows them all. The CSV always holds every row.
    pub shown: Option<usize>,
    /// The rows after `rows`, as their CSV lines: for a table of hundreds
    /// of thousands of rows whose page shows the first few, `rows` may hold
    /// just those and this the rest, a few bytes a cell rather than a
    /// string each. Empty for most tables.
    pub rest: CsvLines,
}

/// Rows of a table as the lines of its CSV: each cell as
/// [`crate::csv_cell::defused`] makes it, quoted where RFC 4180 needs it,
/// each line ended with CRLF; the same bytes the CSV would hold for the
/// same cells.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CsvLines {
    bytes: Vec<u8>,
    rows: usize,
    /// The cells of each row, while they are all alike; the first row
    /// (0-based) that differs, and its cells.
    width: Option<usize>,
    ragged: Option<(usize, usize)>,
}

/// The writer every line of a table's CSV goes through, into `out` with a
/// buffer of `buffer` bytes: quotes where RFC 4180 needs them, CRLF line
/// ends. Its callers defuse the cells ([`defused`]).
pub(super) fn csv_writer<W: std::io::Write>(out: W, buffer: usize) -> csv::Writer<W> {
    csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).buffer_capacity(buffer).from_writer(out)
}

impl CsvLines {
    /// No rows.
    pub fn new() -> CsvLines {
        CsvLines::default()
    }

    /// Adds one row of `cells`.
    pub fn push<'a>(&mut self, cells: impl IntoIterator<Item = &'a str>) {
        let cells: Vec<Cow<'a, str>> = cells.into_iter().map(defused).collect();
        match self.width {
            None => self.width = Some(cells.len()),
            Some(w) if w != cells.len() && self.ragged.is_none() => {
                self.ragged = Some((self.rows, cells.len()))
            }
            Some(_) => {}
        }
        let mut writer = csv_writer(&mut self.bytes, 512);
        // Into memory: only an I/O error could fail it, and a `Vec` gives none.
        writer.write_record(cells.iter().map(|c| c.as_bytes())).expect("writing a CSV line into memory");
        writer.flush().expect("writing a CSV line into memory");
        drop(writer);
        self.rows += 1;
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The lines, one after the other.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The first row (0-based) whose cells are not `columns`, and its cells.
    pub(super) fn ragged(&self, columns: usize) -> Option<(usize, usize)> {
        match (self.width, self.ragged) {
            (Some(w), _) if w != columns => Some((0, w)),
            (_, ragged) => ragged,
        }
    }
}

impl TableData {
    /// How many rows the table has: those held cell by cell and the rest.
    pub fn row_count(&self) -> usize {
        self.rows.len() + self.rest.len()
    }

    /// The rows the page and the summary show.
    pub fn shown_rows(&self) -> &[Vec<String>] {
        &self.rows[..self.shown.map_or(self.rows.len(), |n| n.min(self.rows.len()))]
    }

    /// The number the cell in row `row`, column `column` holds
    /// ([`TableData::numbers`]); `None` when it holds none.
    pub fn number(&self, row: usize, column: usize) -> Option<f64> {
        if self.numbers.is_empty() {
            return self.rows.get(row)?.get(column).and_then(|cell| number_in(cell));
        }
        self.numbers.get(row)?.get(column).copied().flatten()
    }

    /// The CSV file name, e.g. `"spend.csv"`.
    pub fn file_name(&self) -> String {
        format!("{}.csv", self.name)
    }
}
