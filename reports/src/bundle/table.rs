//! [`TableData`]: a table of preformatted cells, shown on the page and in
//! the summary and written whole as a CSV. The renderers read it; it imports
//! none of them.

/// A table of preformatted cells.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableData {
    /// The CSV file stem, e.g. `"spend"` for `spend.csv`: letters, digits,
    /// `-`, `_` and `.`, not starting with `.`; unique within a report.
    pub name: String,
    /// Column headings.
    pub columns: Vec<String>,
    /// Rows of cells, each exactly as long as `columns`.
    pub rows: Vec<Vec<String>>,
    /// Per column: right-align it (numbers). Missing entries mean `false`.
    pub numeric: Vec<bool>,
    /// How many rows the page and the summary show (the first ones); `None`
    /// shows them all. The CSV always holds every row.
    pub shown: Option<usize>,
}

impl TableData {
    /// Whether column `col` is right-aligned.
    pub fn is_numeric(&self, col: usize) -> bool {
        self.numeric.get(col).copied().unwrap_or(false)
    }

    /// The rows the page and the summary show.
    pub fn shown_rows(&self) -> &[Vec<String>] {
        &self.rows[..self.shown.map_or(self.rows.len(), |n| n.min(self.rows.len()))]
    }

    /// The CSV file name, e.g. `"spend.csv"`.
    pub fn file_name(&self) -> String {
        format!("{}.csv", self.name)
    }
}
