//! A report table as CSV: a header row of the column names, then the rows,
//! quoted where RFC 4180 needs it, lines ended with CRLF, UTF-8 without a
//! byte-order mark.
//!
//! The cells carry names apron does not choose (process names, user names,
//! team names from the config): each is written as [`crate::csv_cell`]
//! says, so a spreadsheet never runs one as a formula.

use super::table::{TableData, csv_writer};
use crate::csv_cell::defused;

/// The CSV bytes of `table`.
pub(super) fn render(table: &TableData) -> Result<Vec<u8>, csv::Error> {
    let mut writer = csv_writer(Vec::new(), 8 * 1024);
    writer.write_record(&table.columns)?;
    for row in &table.rows {
        writer.write_record(row.iter().map(|cell| defused(cell).into_owned()))?;
    }
    let mut bytes = writer.into_inner().map_err(|e| csv::Error::from(e.into_error()))?;
    bytes.extend_from_slice(table.rest.bytes());
    Ok(bytes)
}
