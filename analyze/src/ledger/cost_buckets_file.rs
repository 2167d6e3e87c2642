//! `cost_buckets` on disk: the ledger writes each slice's bucket rows to a
//! Parquet file in a temporary folder as soon as the slice is worked
//! through, and the table reads that file, so what the cost reports keep
//! of a period does not grow with the fleet in memory (about 3 rows per
//! GPU-hour: a million for a month of 512 GPUs, some 200 MB as rows and
//! columns in memory, under 20 MB on disk).
//!
//! The folder is made under `$TMPDIR` (else `/tmp`), as the engine's spill
//! folder is, and removed when the table is dropped (with the session, or
//! when another ledger's `cost_buckets` replaces it). It is read through
//! an object store of its own (`apron-ledger://<folder name>/`), not
//! through the data folder's, which lists only the data folder's files.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session as EngineSession, TableProvider};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, TableType};
use datafusion::object_store::local::LocalFileSystem;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use crate::error::SessionError;

/// Rows per row group: the unit the engine's workers read in parallel, and
/// what the writer holds before writing.
const ROW_GROUP_ROWS: usize = 64 * 1024;

/// The file name in the folder.
const FILE_NAME: &str = "cost_buckets.parquet";

/// The bucket rows being written.
pub struct CostBucketsFile {
    dir: tempfile::TempDir,
    schema: SchemaRef,
    writer: ArrowWriter<File>,
    rows: usize,
}

impl std::fmt::Debug for CostBucketsFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CostBucketsFile").field("dir", &self.dir.path()).field("rows", &self.rows).finish()
    }
}

/// Why the working file could not be written, naming the temporary folder.
fn failed(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SessionError {
    SessionError::LedgerFile { dir: std::env::temp_dir(), source: source.into() }
}

impl CostBucketsFile {
    /// A new file under `$TMPDIR`, for rows of `schema`.
    pub fn create(schema: SchemaRef) -> Result<CostBucketsFile, SessionError> {
        let dir = tempfile::Builder::new().prefix("apron-ledger-").tempdir().map_err(failed)?;
        let file = File::create(dir.path().join(FILE_NAME)).map_err(failed)?;
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(ROW_GROUP_ROWS)).build();
        let writer = ArrowWriter::try_new(file, Arc::clone(&schema), Some(props)).map_err(failed)?;
        Ok(CostBucketsFile { dir, schema, writer, rows: 0 })
    }

    /// Appends `batch`.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), SessionError> {
        self.rows += batch.num_rows();
        self.writer.write(batch).map_err(failed)
    }

    /// Closes the file: the table of its rows.
    pub fn finish(self) -> Result<CostBucketsTable, SessionError> {
        self.writer.close().map_err(failed)?;
        Ok(CostBucketsTable { dir: Arc::new(self.dir), schema: self.schema, rows: self.rows })
    }
}

/// The closed file of a ledger's bucket rows.
#[derive(Debug, Clone)]
pub struct CostBucketsTable {
    dir: Arc<tempfile::TempDir>,
    schema: SchemaRef,
    rows: usize,
}

impl CostBucketsTable {
    /// How many rows the file holds.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The folder the file is in.
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }

    /// A table reading the file in `ctx`, keeping the folder while it lives.
    pub fn provider(&self, ctx: &SessionContext) -> Result<Arc<dyn TableProvider>, DataFusionError> {
        let name =
            self.dir.path().file_name().and_then(|n| n.to_str()).unwrap_or("buckets").to_ascii_lowercase();
        let store_url = url::Url::parse(&format!("apron-ledger://{name}"))
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        ctx.register_object_store(&store_url, Arc::new(LocalFileSystem::new_with_prefix(self.dir.path())?));
        let url = ListingTableUrl::parse(format!("apron-ledger://{name}/{FILE_NAME}"))?;
        let options = ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
        let config =
            ListingTableConfig::new(url).with_listing_options(options).with_schema(self.schema.clone());
        Ok(Arc::new(Kept { inner: ListingTable::try_new(config)?, _dir: Arc::clone(&self.dir) }))
    }
}

/// A listing of the file that keeps its folder alive.
#[derive(Debug)]
struct Kept {
    inner: ListingTable,
    _dir: Arc<tempfile::TempDir>,
}

#[async_trait]
impl TableProvider for Kept {
    fn schema(&self) -> SchemaRef {
        self.inner.schema()
    }

    fn table_type(&self) -> TableType {
        self.inner.table_type()
    }

    async fn scan(
        &self,
        state: &dyn EngineSession,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>, DataFusionError> {
        self.inner.scan(state, projection, filters, limit).await
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>, DataFusionError> {
        self.inner.supports_filters_pushdown(filters)
    }
}
