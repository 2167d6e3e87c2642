use std::fs::File;
use std::path::Path;

use apron_schemas::GpuSample;
use apron_schemas::paths::is_data_file_name;
use chrono::NaiveDate;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, StringArray, TimestampMicrosecondArray, UInt16Array,
    UInt64Array,
};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Field, Float32Type, Float64Type, Int32Type, Int64Type, Schema, TimeUnit,
    TimestampMillisecondType,
};
use datafusion::common::ScalarValue;
use datafusion::parquet::arrow::ArrowWriter;

use super::*;

/// 2026-11-30T00:00:00Z in ms.
const DAY: i64 = 1_796_083_200_000 - 86_400_000;

fn date(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, d).expect("valid date")
}

fn write_batch(path: &Path, batch: &RecordBatch) {
    std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
    let mut writer =
        ArrowWriter::try_new(File::create(path).expect("create"), batch.schema(), None).expect("writer");
    writer.write(batch).expect("write");
    writer.close().expect("close");
}

fn write_gpu(layout: &DataLayout, d: u32, host: &str, rows: &[GpuSample]) {
    let batch = apron_schemas::gpu_samples::to_batch(rows).expect("rows match the schema");
    let path = layout.partition_dir(Table::GpuSamples, date(d), host).join("f-000001.parquet");
    write_batch(&path, &batch);
}

fn gpu(ts: i64, util: Option<i32>) -> GpuSample {
    GpuSample { ts, gpu_uuid: "GPU-a".into(), interval_ms: 1_000, gpu_util_pct: util, ..Default::default() }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime starts")
}

fn query(session: &Session, sql: &str) -> Result<Vec<RecordBatch>, Error> {
    runtime().block_on(async {
        let df = session.sql(sql).await?;
        Ok(session.collect(df).await?.1)
    })
}

fn single_i64(batches: &[RecordBatch]) -> i64 {
    let column = batches[0].column(0);
    column.as_primitive::<Int64Type>().value(0)
}

#[test]
fn registers_present_tables_with_partition_columns() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(dir.path());
    write_gpu(&layout, 30, "node07", &[gpu(DAY + 29 * 86_400_000, Some(5))]);
    let session =
        runtime().block_on(Session::open(dir.path(), MemoryLimit::for_this_machine())).expect("opens");
    // The minute tables are computed from the raw files, which have no rollups.
    assert_eq!(session.tables(), [Table::GpuSamples, Table::GpuMinutes, Table::ProcMinutes]);

    let batches = query(&session, "SELECT date, host, gpu_util_pct FROM gpu_samples").expect("runs");
    let schema = batches[0].schema();
    assert_eq!(schema.field_with_name("date").expect("date").data_type(), &DataType::Date32);
    assert_eq!(schema.field_with_name("host").expect("host").data_type(), &DataType::Utf8);
    let day = batches[0].column(0).as_primitive::<Date32Type>().value(0);
    assert_eq!(Date32Type::to_naive_date_opt(day), Some(date(30)));
    assert_eq!(batches[0].column(1).as_string::<i32>().value(0), "node07");
    assert_eq!(batches[0].column(2).as_primitive::<Int32Type>().value(0), 5);

    let minutes =
        query(&session, "SELECT date, host, gpu_util_pct_mean, seconds FROM gpu_minutes").expect("runs");
    assert_eq!(minutes[0].column(1).as_string::<i32>().value(0), "node07");
    assert_eq!(minutes[0].column(2).as_primitive::<Float64Type>().value(0), 5.0);
}

#[test]
fn a_filter_on_the_partition_columns_skips_other_folders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(dir.path());
    write_gpu(&layout, 30, "a", &[gpu(DAY, Some(1)), gpu(DAY + 1_000, Some(2))]);
    write_gpu(&layout, 29, "a", &[gpu(DAY - 86_400_000, Some(3))]);
    // Hidden and temporary files are never read.
    let part = layout.partition_dir(Table::GpuSamples, date(30), "a");
    for name in [".x.parquet", "._x.parquet", "_x.parquet", ".f-000002.parquet.tmp"] {
        std::fs::write(part.join(name), b"not parquet at all").expect("write");
    }
    // A broken file in folders the filters exclude: reading it would fail.
    for (d, host) in [(30, "b"), (29, "b")] {
        let bad = layout.partition_dir(Table::GpuSamples, date(d), host).join("x.parquet");
        std::fs::create_dir_all(bad.parent().expect("parent")).expect("mkdir");
        std::fs::write(&bad, b"not parquet at all").expect("write");
    }
    let session =
        runtime().block_on(Session::open(dir.path(), MemoryLimit::for_this_machine())).expect("opens");
    let sum = |sql: &str| single_i64(&query(&session, sql).expect(sql));
    assert_eq!(sum("SELECT sum(gpu_util_pct) FROM gpu_samples WHERE host = 'a'"), 6);
    assert_eq!(sum("SELECT sum(gpu_util_pct) FROM gpu_samples WHERE date = '2026-11-30' AND host = 'a'"), 3);
    assert_eq!(sum("SELECT count(*) FROM gpu_samples WHERE host = 'a' AND date >= DATE '2026-11-29'"), 3);
    // Without the filter the broken file is read, and named.
    let err = query(&session, "SELECT sum(gpu_util_pct) FROM gpu_samples").expect_err("bad file");
    match err {
        Error::Session(SessionError::CorruptFile { path, .. }) => {
            assert!(path.ends_with("gpu_samples/date=2026-11-29/host=b/x.parquet"), "{path:?}")
        }
        other => panic!("expected a corrupt file, got {other:?}"),
    }
}

#[test]
fn files_of_other_tools_are_cast_and_completed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(dir.path());
    // gpu_util_pct as UInt16, fb_used_bytes as UInt64, power_mw as Int64,
    // ts as microseconds without a time zone, an unknown column, and most
    // optional columns missing.
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), false),
        Field::new("gpu_uuid", DataType::Utf8, false),
        Field::new("gpu_index", DataType::Int64, false),
        Field::new("interval_ms", DataType::Int64, false),
        Field::new("gpu_util_pct", DataType::UInt16, true),
        Field::new("fb_used_bytes", DataType::UInt64, true),
        Field::new("power_mw", DataType::Int64, true),
        Field::new("vendor_extra", DataType::Float64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(TimestampMicrosecondArray::from(vec![DAY * 1_000, (DAY + 1_000) * 1_000])),
        Arc::new(StringArray::from(vec!["GPU-x", "GPU-x"])),
        Arc::new(Int64Array::from(vec![3, 3])),
        Arc::new(Int64Array::from(vec![1_000, 1_000])),
        Arc::new(UInt16Array::from(vec![Some(40), None])),
        Arc::new(UInt64Array::from(vec![Some(80 << 30), Some(0)])),
        Arc::new(Int64Array::from(vec![Some(300_000), Some(0)])),
        Arc::new(Float64Array::from(vec![1.5, 2.5])),
    ];
    let batch = RecordBatch::try_new(schema, columns).expect("batch");
    let path = layout.partition_dir(Table::GpuSamples, date(30), "other").join("import.parquet");
    write_batch(&path, &batch);

    let session =
        runtime().block_on(Session::open(dir.path(), MemoryLimit::for_this_machine())).expect("opens");
    let batches = query(
        &session,
        "SELECT ts, gpu_index, gpu_util_pct, fb_used_bytes, power_mw, temp_c, sm_active_pct \
         FROM gpu_samples WHERE gpu_util_pct IS NULL OR gpu_util_pct > 10 ORDER BY ts",
    )
    .expect("runs");
    let b = &batches[0];
    assert_eq!(b.num_rows(), 2);
    let ts = b.column(0).as_primitive::<TimestampMillisecondType>();
    assert_eq!((ts.value(0), ts.value(1)), (DAY, DAY + 1_000));
    assert_eq!(b.column(1).as_primitive::<Int32Type>().value(0), 3);
    let util = b.column(2).as_primitive::<Int32Type>();
    assert_eq!((util.value(0), util.is_null(1)), (40, true));
    let fb = b.column(3).as_primitive::<Int64Type>();
    assert_eq!((fb.value(0), fb.value(1)), (80 << 30, 0));
    assert_eq!(b.column(4).as_primitive::<Int32Type>().value(0), 300_000);
    assert_eq!(b.column(5).null_count(), 2, "a missing column reads as null");
    assert_eq!(b.column(6).null_count(), 2);
    let err = query(&session, "SELECT vendor_extra FROM gpu_samples").expect_err("unknown column");
    assert!(matches!(err, Error::Session(SessionError::Query { .. })), "{err:?}");
}

#[test]
fn rollups_written_before_sm_active_read_it_as_null() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(dir.path());
    // A gpu_minutes file of the layout before sm_active_pct_mean existed.
    let row = apron_schemas::GpuMinute {
        minute: DAY,
        gpu_uuid: "GPU-a".into(),
        seconds: 60.0,
        samples: 60,
        gpu_util_pct_mean: Some(12.5),
        sm_active_pct_mean: Some(99.0),
        ..Default::default()
    };
    let batch = apron_schemas::gpu_minutes::to_batch(&[row]).expect("rows match the schema");
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|i| batch.schema().field(*i).name() != "sm_active_pct_mean")
        .collect();
    let old = batch.project(&keep).expect("projection");
    let path = layout.partition_dir(Table::GpuMinutes, date(30), "old").join("f-000001.parquet");
    write_batch(&path, &old);

    let session =
        runtime().block_on(Session::open(dir.path(), MemoryLimit::for_this_machine())).expect("opens");
    let batches =
        query(&session, "SELECT gpu_util_pct_mean, sm_active_pct_mean FROM gpu_minutes").expect("runs");
    let b = &batches[0];
    assert_eq!(b.num_rows(), 1);
    assert_eq!(b.column(0).as_primitive::<Float64Type>().value(0), 12.5);
    assert!(b.column(1).is_null(0), "a rollup without the column reads it as null");
}

#[test]
fn samples_written_before_gr_engine_active_read_it_as_null() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(dir.path());
    // A gpu_samples file of the layout before gr_engine_active_pct existed,
    // and a newer one beside it.
    let mut row = gpu(DAY, Some(7));
    row.gr_engine_active_pct = Some(64.0);
    let batch = apron_schemas::gpu_samples::to_batch(&[row.clone()]).expect("rows match the schema");
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|i| batch.schema().field(*i).name() != "gr_engine_active_pct")
        .collect();
    let old = batch.project(&keep).expect("projection");
    write_batch(&layout.partition_dir(Table::GpuSamples, date(30), "old").join("f-000001.parquet"), &old);
    write_gpu(&layout, 30, "new", &[row]);

    let session =
        runtime().block_on(Session::open(dir.path(), MemoryLimit::for_this_machine())).expect("opens");
    let batches = query(
        &session,
        "SELECT host, gpu_util_pct, gr_engine_active_pct FROM gpu_samples ORDER BY host DESC",
    )
    .expect("runs");
    let b = datafusion::arrow::compute::concat_batches(&batches[0].schema(), &batches).expect("one batch");
    assert_eq!(b.num_rows(), 2);
    assert_eq!(b.column(1).as_primitive::<Int32Type>().values(), &[7, 7]);
    let gr = b.column(2).as_primitive::<Float32Type>();
    assert!(gr.is_null(0), "the older file reads it as null");
    assert_eq!(gr.value(1), 64.0);
}

#[test]
fn statements_that_write_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let layout = DataLayout::new(dir.path());
    write_gpu(&layout, 30, "a", &[gpu(DAY, Some(1))]);
    let session =
        runtime().block_on(Session::open(dir.path(), MemoryLimit::for_this_machine())).expect("opens");
    for (sql, name) in [
        ("CREATE TABLE t AS SELECT 1", "CREATE TABLE"),
        ("create or replace view v as select 1", "CREATE OR REPLACE VIEW"),
        ("CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/tmp/x.csv'", "CREATE EXTERNAL TABLE"),
        ("DROP TABLE gpu_samples", "DROP TABLE"),
        ("INSERT INTO gpu_samples VALUES (1)", "INSERT"),
        ("DELETE FROM gpu_samples", "DELETE"),
        ("UPDATE gpu_samples SET temp_c = 1", "UPDATE"),
        ("COPY gpu_samples TO '/tmp/out.csv'", "COPY"),
        ("SET datafusion.execution.batch_size = 1", "SET"),
        ("RESET datafusion.execution.batch_size", "RESET"),
        ("EXPLAIN INSERT INTO gpu_samples VALUES (1)", "INSERT"),
        ("BEGIN TRANSACTION", "BEGIN"),
    ] {
        match query(&session, sql) {
            Err(Error::Session(SessionError::ReadOnly { statement })) => assert_eq!(statement, name, "{sql}"),
            other => panic!("{sql}: expected read-only, got {other:?}"),
        }
    }
    for sql in [
        "SELECT 1",
        "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
        "EXPLAIN SELECT count(*) FROM gpu_samples",
        "DESCRIBE gpu_samples",
        "SHOW TABLES",
        "SHOW COLUMNS FROM gpu_samples",
        "SELECT * FROM generate_series(1, 3)",
    ] {
        query(&session, sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
}

#[test]
fn unknown_tables_name_the_tables_present() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_gpu(&DataLayout::new(dir.path()), 30, "a", &[gpu(DAY, Some(1))]);
    let session =
        runtime().block_on(Session::open(dir.path(), MemoryLimit::for_this_machine())).expect("opens");
    for (sql, name) in [
        ("SELECT * FROM proc_samples", "proc_samples"),
        ("SELECT * FROM gpu_samples g JOIN nope n ON g.gpu_uuid = n.gpu_uuid", "nope"),
    ] {
        match query(&session, sql) {
            Err(err @ Error::Session(SessionError::UnknownTable { .. })) => {
                let text = err.to_string();
                assert!(text.starts_with(&format!("table {name} not found in ")), "{text}");
                assert!(text.ends_with("; tables present: gpu_samples, gpu_minutes, proc_minutes"), "{text}");
            }
            other => panic!("{sql}: expected an unknown table, got {other:?}"),
        }
    }
}

#[test]
fn parameters_are_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_gpu(&DataLayout::new(dir.path()), 30, "a", &[gpu(DAY, Some(7)), gpu(DAY + 1, Some(9))]);
    let session =
        runtime().block_on(Session::open(dir.path(), MemoryLimit::for_this_machine())).expect("opens");
    let batches = runtime()
        .block_on(async {
            let df = session
                .sql_with_params(
                    "SELECT count(*) FROM gpu_samples WHERE gpu_util_pct > $1 AND host = $2",
                    vec![ScalarValue::Int32(Some(8)), ScalarValue::from("a")],
                )
                .await?;
            session.collect(df).await
        })
        .expect("runs");
    assert_eq!(single_i64(&batches.1), 1);
}

#[test]
fn a_data_folder_without_tables_is_no_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("wal")).expect("mkdir");
    let err = runtime()
        .block_on(Session::open(dir.path(), MemoryLimit::for_this_machine()))
        .expect_err("no tables");
    let text = err.to_string();
    assert!(text.starts_with(&format!("no apron data in {}", dir.path().display())), "{text}");
    assert!(text.contains("apron-recorder simulate"), "{text}");

    let missing = dir.path().join("absent");
    assert!(matches!(
        runtime().block_on(Session::open(&missing, MemoryLimit::for_this_machine())),
        Err(Error::Session(SessionError::DataDir { .. }))
    ));
    std::fs::write(dir.path().join("file"), b"").expect("write");
    assert!(matches!(
        runtime().block_on(Session::open(&dir.path().join("file"), MemoryLimit::for_this_machine())),
        Err(Error::Session(SessionError::NotADir { .. }))
    ));
}

#[test]
fn data_file_names() {
    assert!(is_data_file_name("20261130T014500000Z-000001.parquet"));
    for name in [".a.parquet.tmp", ".a.parquet", "._a.parquet", "_SUCCESS", "a.parquet.tmp"] {
        assert!(!is_data_file_name(name), "{name}");
    }
    // The listing's glob says the same as the rule.
    let glob = glob::Pattern::new(apron_schemas::paths::DATA_FILE_GLOB).expect("a valid glob");
    for name in [
        "a.parquet",
        "20261130T014500000Z-000001.parquet",
        ".a.parquet",
        "._a.parquet",
        "_a.parquet",
        "a.txt",
    ] {
        assert_eq!(glob.matches(name), is_data_file_name(name), "{name}");
    }
}

#[test]
fn leading_keywords_name_the_statement() {
    assert_eq!(leading_keywords("INSERT INTO t VALUES (1)"), "INSERT");
    assert_eq!(leading_keywords("CREATE TEMPORARY VIEW v AS SELECT 1"), "CREATE TEMPORARY VIEW");
    assert_eq!(leading_keywords("DROP TABLE IF EXISTS t"), "DROP TABLE");
    assert_eq!(leading_keywords(""), "this statement");
}
