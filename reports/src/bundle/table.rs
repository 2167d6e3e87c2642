//! [`TableData`]: a table of cells as its CSV holds them, with the numbers
//! the caller computed, shown on the page and in the summary (titled and
//! formatted by its columns' kinds, `columns.rs`, from the numbers, not from
//! the text) and written whole as a CSV. The renderers read it; it imports
//! none of them.

use super::columns::number_in;

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
}

impl TableData {
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
