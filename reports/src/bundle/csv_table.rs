//! A report table as CSV: a header row of the column names, then the rows,
//! quoted where RFC 4180 needs it, lines ended with CRLF, UTF-8 without a
//! byte-order mark.

use super::TableData;

/// The CSV bytes of `table`.
pub(super) fn render(table: &TableData) -> Result<Vec<u8>, csv::Error> {
    let mut writer = csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).from_writer(Vec::new());
    writer.write_record(&table.columns)?;
    for row in &table.rows {
        writer.write_record(row)?;
    }
    writer.into_inner().map_err(|e| csv::Error::from(e.into_error()))
}
