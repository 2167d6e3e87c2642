//! Shipping markers: what of a data folder is in the bucket, kept on disk
//! so that it survives restarts and is not worked out again each time.
//!
//! `DATA/.ship/<table>/date=D/host=H` holds one line, `NAME<TAB>SIZE<TAB>URL`:
//! the partition's one file (after compaction) named NAME, of SIZE bytes,
//! is confirmed in the bucket at URL (the `s3://BUCKET/PREFIX` it was
//! shipped to). A marker is written only after the store confirmed the
//! object, so a crash leaves a partition unmarked (and shipped again,
//! which skips what is there and equal), never marked and missing.
//!
//! A partition is shipped while its marker names the file it holds now:
//! a late write merged into a new file, or a marker of another bucket,
//! makes it unshipped again. The backlog is every closed partition not
//! shipped: it is read from the data folder and the markers, so it
//! survives restarts without a queue of its own.

use std::io::Write;

use apron_schemas::folders::data_files;
use apron_schemas::{DataLayout, Table};
use apron_store::write_error::WriteError;
use chrono::NaiveDate;

/// What one marker says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// The partition's file that was shipped.
    pub name: String,
    /// Its size, bytes.
    pub size: u64,
    /// Where to: `s3://BUCKET/PREFIX`.
    pub url: String,
}

/// Whether this data folder ships its days (it has a `.ship` folder): then
/// retention removes only shipped days.
pub fn ships(layout: &DataLayout) -> bool {
    layout.ship_root().is_dir()
}

/// The marker of a partition, if there is one and it reads.
pub fn read(layout: &DataLayout, table: Table, date: NaiveDate, host: &str) -> Option<Marker> {
    let text = std::fs::read_to_string(layout.ship_marker_path(table, date, host)).ok()?;
    let mut fields = text.trim_end_matches('\n').splitn(3, '\t');
    let name = fields.next()?.to_owned();
    let size = fields.next()?.parse().ok()?;
    let url = fields.next()?.to_owned();
    Some(Marker { name, size, url })
}

/// Writes the marker of a partition, durably.
pub fn write(
    layout: &DataLayout,
    table: Table,
    date: NaiveDate,
    host: &str,
    marker: &Marker,
) -> Result<(), WriteError> {
    let path = layout.ship_marker_path(table, date, host);
    apron_store::durable::write_file(&path, |mut file, tmp| {
        writeln!(file, "{}\t{}\t{}", marker.name, marker.size, marker.url)
            .map_err(|source| WriteError::Io { op: "write", path: tmp.to_path_buf(), source })?;
        Ok(file)
    })
}

/// Removes the marker of a partition (its partition was removed), and its
/// day's folder of markers once empty.
pub fn remove(layout: &DataLayout, table: Table, date: NaiveDate, host: &str) {
    let path = layout.ship_marker_path(table, date, host);
    let _ = std::fs::remove_file(&path);
    if let Some(day) = path.parent() {
        let _ = std::fs::remove_dir(day);
    }
}

/// Whether the partition's files now are exactly the one its marker names,
/// at its size, shipped to `url` (to anywhere when `None`).
pub fn is_shipped(layout: &DataLayout, table: Table, date: NaiveDate, host: &str, url: Option<&str>) -> bool {
    let Some(marker) = read(layout, table, date, host) else { return false };
    if url.is_some_and(|u| u != marker.url) {
        return false;
    }
    let files = data_files(&layout.partition_dir(table, date, host));
    match files.as_slice() {
        [(name, path)] => {
            *name == marker.name && std::fs::metadata(path).is_ok_and(|m| m.len() == marker.size)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_holds_while_the_partition_holds_its_file() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(tmp.path());
        let date = NaiveDate::from_ymd_opt(2026, 11, 29).expect("a date");
        let dir = layout.partition_dir(Table::GpuSamples, date, "n1");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("a.parquet"), b"12345").expect("write");
        assert!(!ships(&layout));
        assert!(!is_shipped(&layout, Table::GpuSamples, date, "n1", None));
        let marker = Marker { name: "a.parquet".into(), size: 5, url: "s3://b/p".into() };
        write(&layout, Table::GpuSamples, date, "n1", &marker).expect("writes");
        assert!(ships(&layout));
        assert_eq!(read(&layout, Table::GpuSamples, date, "n1"), Some(marker));
        assert!(is_shipped(&layout, Table::GpuSamples, date, "n1", None));
        assert!(is_shipped(&layout, Table::GpuSamples, date, "n1", Some("s3://b/p")));
        assert!(!is_shipped(&layout, Table::GpuSamples, date, "n1", Some("s3://b/other")));
        assert!(!is_shipped(&layout, Table::GpuMinutes, date, "n1", None), "another table");
        // A late write: two files, then a merged one of another name.
        std::fs::write(dir.join("b.parquet"), b"6").expect("write");
        assert!(!is_shipped(&layout, Table::GpuSamples, date, "n1", None));
        std::fs::remove_file(dir.join("a.parquet")).expect("rm");
        assert!(!is_shipped(&layout, Table::GpuSamples, date, "n1", None));
        remove(&layout, Table::GpuSamples, date, "n1");
        assert_eq!(read(&layout, Table::GpuSamples, date, "n1"), None);
    }
}
