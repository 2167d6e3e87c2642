//! Parquet writer settings shared by every apron file.
//!
//! Measured on synthetic 1 Hz telemetry (docs/src/recording.md, "On disk"): dictionary
//! encoding only on string columns, DELTA_BINARY_PACKED on timestamps and
//! integer metrics, BYTE_STREAM_SPLIT on floats and zstd on top make files
//! far smaller than zstd alone. Statistics are kept per page so the page
//! index lets readers skip pages, and the sort order is declared so engines
//! can use it.

use arrow::datatypes::{DataType, Schema};
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use crate::{SCHEMA_VERSION, SCHEMA_VERSION_KEY, TABLE_KEY, Table};

/// zstd level: 3 is zstd's default and the best size per CPU second here.
const ZSTD_LEVEL: i32 = 3;

/// Rows per row group: a day of one GPU at 1 Hz is 86,400 rows, so a
/// closed-day file of a few GPUs is a handful of row groups.
pub const MAX_ROW_GROUP_ROWS: usize = 1 << 20;

/// The key-value metadata key that holds the host a file was recorded on.
pub const HOST_KEY: &str = "apron.host";

/// Writer properties for a file of `table` recorded on `host`.
pub fn writer_properties(table: Table, host: &str) -> WriterProperties {
    let schema = table.schema();
    let mut builder = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL).expect("3 is a valid zstd level")))
        .set_dictionary_enabled(false)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(MAX_ROW_GROUP_ROWS))
        .set_sorting_columns(Some(sorting_columns(table, &schema)))
        .set_key_value_metadata(Some(vec![
            KeyValue::new(SCHEMA_VERSION_KEY.to_owned(), SCHEMA_VERSION.to_owned()),
            KeyValue::new(TABLE_KEY.to_owned(), table.name().to_owned()),
            KeyValue::new(HOST_KEY.to_owned(), host.to_owned()),
        ]));
    for field in schema.fields() {
        let path = ColumnPath::from(field.name().as_str());
        builder = match field.data_type() {
            DataType::Utf8 => builder.set_column_dictionary_enabled(path, true),
            DataType::Float32 | DataType::Float64 => {
                builder.set_column_encoding(path, Encoding::BYTE_STREAM_SPLIT)
            }
            // Booleans are bit-packed already (RLE in Parquet 2.0).
            DataType::Boolean => builder,
            _ => builder.set_column_encoding(path, Encoding::DELTA_BINARY_PACKED),
        };
    }
    builder.build()
}

/// The declared sort order, [`Table::sort_columns`]: `gpu_uuid`, then `ts`
/// (rollups: `minute`), then `pid` where present.
fn sorting_columns(table: Table, schema: &Schema) -> Vec<SortingColumn> {
    table
        .sort_columns()
        .iter()
        .filter_map(|name| schema.index_of(name).ok())
        .map(|idx| SortingColumn {
            column_idx: i32::try_from(idx).expect("a schema has fewer than 2^31 columns"),
            descending: false,
            nulls_first: false,
        })
        .collect()
}
