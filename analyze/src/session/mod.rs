//! The query session over one data folder: every table present registered
//! as a Hive-partitioned Parquet listing, read-only SQL, and the errors of
//! planning and running a query turned into messages that name what is wrong.
//!
//! The layout (which folder holds which table) and the schemas come from
//! `apron_schemas`; how results are printed is [`crate::output`]; which file
//! is broken is found by [`crate::session::integrity`]; the memory pool and spill
//! folder every query runs under are [`crate::session::memory`]'s.
//!
//! Each table is registered with its canonical schema, not one inferred from
//! the files, so files written by other tools read the same way: an integer
//! column of another width or signedness is cast, a column apron does not
//! know is ignored, and a missing nullable column reads as null. The
//! partition columns `date` (`Date32`) and `host` (`Utf8`) come from the
//! folder names and are not stored in the files; a filter on them skips whole
//! folders.
//!
//! A file the user names in place of a table (`FROM 'x.parquet'`, `FROM
//! 'x.csv'`, a path relative to the working folder) is read as a table of
//! its own, its format from its extension and its schema from the file
//! (DataFusion's URL tables): a result `apron sql --out` wrote reads back;
//! `read_parquet('x')` and `read_csv('x')` read one in the format they name
//! (`file_tables`).
//! Reading only: every statement that would write through such a table is
//! refused as any other ([`Session::sql`]), and the file system refuses
//! writes besides (`crate::session::local_files`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use apron_schemas::paths::DATA_FILE_EXTENSION;
use apron_schemas::{DataLayout, Table, test_pause};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::catalog::TableProvider;
use datafusion::common::ParamValues;
use datafusion::config::TableParquetOptions;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::{MemTable, ViewTable, provider_as_source};
use datafusion::error::DataFusionError;
use datafusion::execution::context::SQLOptions;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::logical_expr::LogicalPlan;
use datafusion::logical_expr::LogicalPlanBuilder;
use datafusion::object_store;
use datafusion::object_store::ObjectMeta;
use datafusion::parquet::errors::ParquetError;
use datafusion::physical_plan::{ExecutionPlan, collect_partitioned, execute_stream};
use datafusion::prelude::{DataFrame, SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::Statement as SqlStatement;
use datafusion::sql::sqlparser::dialect::{Dialect, GenericDialect, dialect_from_str};
use futures::StreamExt;

use crate::error::{Error, SessionError};
use crate::output::{BatchWriter, Format};
use crate::session::local_files::DataFileStore;
use crate::session::table_schema::{
    file_schema, full_schema, ledger_file_schema, ledger_full_schema, partition_columns,
};
use apron_schemas::paths::DATA_FILE_GLOB;
use memory::MemoryLimit;

/// A DataFusion session over one data folder.
///
/// Commands get one from [`Session::open`], plan their SQL with
/// [`Session::sql`] or [`Session::sql_with_params`] (read-only), and print
/// with [`Session::print`] or take the rows with [`Session::collect`]; all
/// return [`Error`] with messages that name the table or file at fault.
pub struct Session {
    ctx: SessionContext,
    /// The minute tables as the ledger reads them
    /// ([`Session::ledger_sql_with_params`]), on the same memory pool:
    /// built by its first query, so a session that computes no ledger
    /// (`apron sql`, `pick`) lists nothing and casts nothing for it.
    ledger: LazyLedger,
    layout: DataLayout,
    /// The data folder, absolute and canonical, as the query engine sees it.
    root: PathBuf,
    tables: Vec<Table>,
    /// The memory limit every query of this session runs under.
    memory: MemoryLimit,
    /// The bucket, when the data folder is one (`s3://…`).
    bucket: Option<object_storage::Bucket>,
    /// The files `read_parquet` and `read_csv` read.
    file_tables: Arc<file_tables::FileTables>,
    /// The hosts with rows in the write-ahead log, by UTC day (days since the epoch).
    wal_hosts: std::collections::BTreeSet<(i32, String)>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("data", &self.layout.root())
            .field("tables", &self.tables)
            .field("memory", &self.memory)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Opens the data folder `data` and registers every table whose folder
    /// is there (`DATA/<table>/`). A table without a folder is not registered.
    /// Every query of the session holds at most `memory` (sorts and
    /// aggregations spill past it; see [`crate::session::memory`]).
    ///
    /// Fails when `data` is missing or not a folder, and with
    /// [`SessionError::NoData`] when it holds no table folder at all. Nothing is
    /// read from the Parquet files yet: that happens when a query runs.
    pub async fn open(data: &Path, memory: MemoryLimit) -> Result<Self, Error> {
        Self::open_within(data, memory, None).await
    }

    /// [`Session::open`], for queries of `days` only: on a bucket
    /// (`s3://BUCKET/PREFIX`, `bucket`), only those days' folders are
    /// listed; a local folder is read as by [`Session::open`].
    pub async fn open_within(data: &Path, memory: MemoryLimit, days: Option<Days>) -> Result<Self, Error> {
        if let Some(url) = object_storage::bucket_url(data) {
            return Self::open_bucket(url, memory, days).await;
        }
        let meta = std::fs::metadata(data)
            .map_err(|source| SessionError::DataDir { path: data.to_path_buf(), source })?;
        if !meta.is_dir() {
            return Err(SessionError::NotADir { path: data.to_path_buf() }.into());
        }
        // The URLs need an absolute path; messages keep the path as given.
        let root = std::fs::canonicalize(data)
            .map_err(|source| SessionError::DataDir { path: data.to_path_buf(), source })?;

        let runtime =
            memory::runtime_env(memory).map_err(|source| SessionError::Engine { limit: memory, source })?;
        let ctx = SessionContext::new_with_config_rt(session_config(memory), Arc::clone(&runtime))
            .enable_url_table();
        let parquet_options = ctx.state().default_table_options().parquet;
        let layout = DataLayout::new(data);
        let absolute = DataLayout::new(&root);
        let recent = recent::read(&absolute, &full_schema).map_err(|source| SessionError::Register {
            table: "wal".to_owned(),
            path: layout.wal_root(),
            source: DataFusionError::ArrowError(Box::new(source), None),
        })?;
        test_pause::pause_at(test_pause::points::AFTER_WAL_READ);
        // Every listing reads the local files through this store: fenced by
        // the segments just read (see `fence`), and naming a zero-byte data
        // file instead of skipping it.
        let file_url = url::Url::parse("file://").expect("a constant URL parses");
        ctx.register_object_store(&file_url, Arc::new(DataFileStore::new(recent.fence.clone())));
        let register_err = |table: Table| {
            let path = layout.table_dir(table);
            move |source| SessionError::Register { table: table.name().to_owned(), path, source }
        };
        let format = || ParquetFormat::default().with_options(parquet_options.clone());
        let mut listings = std::collections::HashMap::new();
        for table in Table::ALL {
            let dir = absolute.table_dir(table);
            if dir.is_dir() {
                let listing =
                    listing_table(&dir, file_schema(table), format()).map_err(register_err(table))?;
                listings.insert(table, Arc::new(listing) as Arc<dyn TableProvider>);
            }
        }
        let unrolled = minute_tables::unrolled(&absolute);
        let derived = minute_tables::from_raw(
            session_config(memory),
            Arc::clone(&runtime),
            listings.get(&Table::GpuSamples).cloned(),
            listings.get(&Table::ProcSamples).cloned(),
            &unrolled,
        )
        .await
        .map_err(register_err(Table::GpuMinutes))?;
        let (gpu_derived, proc_derived) = derived.map_or((None, None), |(g, p)| (Some(g), Some(p)));
        let mut tables = Vec::new();
        let mut ledger_tables = Vec::new();
        for table in Table::ALL {
            let derived = match table {
                Table::GpuMinutes => gpu_derived.clone(),
                Table::ProcMinutes => proc_derived.clone(),
                _ => None,
            };
            if LEDGER_TABLES.contains(&table) {
                let dir = absolute.table_dir(table);
                ledger_tables.push(LedgerTable {
                    table,
                    files: dir.is_dir().then_some(ListingAt::Folder(dir)),
                    wal: recent.batches(table).to_vec(),
                    derived: derived.clone(),
                });
            }
            let parts =
                TableParts { files: listings.get(&table).cloned(), wal: recent.batches(table), derived };
            let Some(provider) =
                table_provider(table, parts, full_schema(table)).map_err(register_err(table))?
            else {
                continue;
            };
            ctx.register_table(table.name(), provider).map_err(register_err(table))?;
            tables.push(table);
        }
        if tables.is_empty() {
            let names: Vec<_> = Table::ALL.iter().map(|t| format!("{}/", t.name())).collect();
            return Err(SessionError::NoData { path: data.to_path_buf(), tables: names.join(", ") }.into());
        }
        register_absent_minute_tables(&ctx, &tables).map_err(register_err(Table::AllocMinutes))?;
        tracing::debug!(data = %data.display(), tables = ?tables, unrolled = ?unrolled, "registered the tables present");
        let file_tables = file_tables::FileTables::register(&ctx);
        let wal_hosts = recent.hosts;
        let ledger = LazyLedger::new(runtime, memory, parquet_options, &layout, ledger_tables);
        Ok(Self { ctx, ledger, layout, root, tables, memory, bucket: None, file_tables, wal_hosts })
    }

    /// [`Session::open_within`] a bucket: every table its folders hold, read
    /// through [`object_storage::BucketStore`]; no write-ahead log, derived minutes
    /// or fence (a bucket holds closed, compacted days with their rollups).
    async fn open_bucket(url: &str, memory: MemoryLimit, days: Option<Days>) -> Result<Self, Error> {
        let (bucket, present) = object_storage::Bucket::open(url, days).await?;
        let runtime =
            memory::runtime_env(memory).map_err(|source| SessionError::Engine { limit: memory, source })?;
        let ctx = SessionContext::new_with_config_rt(session_config(memory), Arc::clone(&runtime))
            .enable_url_table();
        let parquet_options = ctx.state().default_table_options().parquet;
        // What the header, the report and every message call the data: the
        // URL without the credentials it may hold (which the S3 client
        // ignores; it reads them from the environment).
        let shown = apron_store::redact::userinfo(url).into_owned();
        let layout = DataLayout::new(&shown);
        let bucket_url = url::Url::parse(&bucket.bucket_url())
            .map_err(|e| SessionError::Bucket { url: shown.clone(), cause: e.to_string() })?;
        ctx.register_object_store(&bucket_url, bucket.store());
        let mut tables = Vec::new();
        let mut ledger_tables = Vec::new();
        for table in present {
            let register_err = |source| SessionError::Register {
                table: table.name().to_owned(),
                path: layout.table_dir(table),
                source,
            };
            let format = ParquetFormat::default().with_options(parquet_options.clone());
            let listing = bucket_listing(&bucket.table_url(table), file_schema(table), format);
            ctx.register_table(table.name(), Arc::new(listing.map_err(register_err)?))
                .map_err(register_err)?;
            if LEDGER_TABLES.contains(&table) {
                ledger_tables.push(LedgerTable {
                    table,
                    files: Some(ListingAt::Url(bucket.table_url(table))),
                    wal: Vec::new(),
                    derived: None,
                });
            }
            tables.push(table);
        }
        if tables.is_empty() {
            let names: Vec<_> = Table::ALL.iter().map(|t| format!("{}/", t.name())).collect();
            return Err(SessionError::EmptyBucket { url: shown, tables: names.join(", ") }.into());
        }
        register_absent_minute_tables(&ctx, &tables).map_err(|source| SessionError::Register {
            table: Table::AllocMinutes.name().to_owned(),
            path: layout.table_dir(Table::AllocMinutes),
            source,
        })?;
        tracing::debug!(data = %shown, tables = ?tables, ?days, "registered the bucket's tables");
        let file_tables = file_tables::FileTables::register(&ctx);
        let ledger = LazyLedger::new(runtime, memory, parquet_options, &layout, ledger_tables);
        Ok(Self {
            ctx,
            ledger,
            layout,
            root: PathBuf::new(),
            tables,
            memory,
            bucket: Some(bucket),
            file_tables,
            wal_hosts: Default::default(),
        })
    }

    /// The hosts with a folder in `table`'s day `date`.
    pub async fn hosts_on(&self, table: Table, date: chrono::NaiveDate) -> Vec<String> {
        if let Some(bucket) = &self.bucket {
            let mut hosts = bucket.hosts_on(table, date).await;
            hosts.sort();
            return hosts;
        }
        let folder = self.layout.date_dir(table, date);
        let mut hosts: Vec<String> = apron_schemas::folders::subfolders(&folder)
            .ok()
            .flatten()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(name, _)| name.strip_prefix("host=").map(str::to_owned))
            .filter(|host| !host.chars().any(char::is_control))
            .collect();
        hosts.sort();
        hosts
    }

    /// Every host with rows of `date` in any table of the session: those
    /// with a folder that day in a table's folder, and those with rows of
    /// that day in the write-ahead log; sorted. `None` on a bucket, whose
    /// folders are not all listed here (a listing per host would cost a
    /// request each).
    pub async fn hosts_of_day(&self, date: chrono::NaiveDate) -> Option<Vec<String>> {
        if self.bucket.is_some() {
            return None;
        }
        let mut hosts = std::collections::BTreeSet::new();
        for &table in &self.tables {
            hosts.extend(self.hosts_on(table, date).await);
        }
        let day = i32::try_from((date - chrono::NaiveDate::default()).num_days()).unwrap_or(i32::MAX);
        hosts.extend(
            self.wal_hosts
                .range((day, String::new())..)
                .take_while(|(d, _)| *d == day)
                .map(|(_, h)| h.clone()),
        );
        Some(hosts.into_iter().collect())
    }

    /// The first and last day with anything of `tables` in the session: a
    /// `date=` folder of one of them, or rows of that day in the
    /// write-ahead log; `None` when there is none, and on a bucket (whose
    /// session sees only the days it was opened for). Folders are listed,
    /// no file is read.
    pub fn day_span(&self, tables: &[Table]) -> Option<(chrono::NaiveDate, chrono::NaiveDate)> {
        if self.bucket.is_some() {
            return None;
        }
        let mut days = std::collections::BTreeSet::new();
        for &table in tables.iter().filter(|t| self.tables.contains(t)) {
            let names = apron_schemas::folders::subfolders(&self.layout.table_dir(table)).ok().flatten();
            days.extend(
                names
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|(n, _)| apron_schemas::paths::parse_date_dir_name(n)),
            );
        }
        let epoch = chrono::NaiveDate::default();
        days.extend(
            self.wal_hosts.iter().filter_map(|(day, _)| {
                epoch.checked_add_signed(chrono::TimeDelta::try_days(i64::from(*day))?)
            }),
        );
        Some((*days.first()?, *days.last()?))
    }

    /// The DataFusion context, for what this type does not wrap (user
    /// functions, `DataFrame` building). Queries run through it are not
    /// checked for being read-only.
    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The data folder's layout, rooted at the path as the user gave it.
    pub fn layout(&self) -> &DataLayout {
        &self.layout
    }

    /// The tables registered (those whose folder is present), in
    /// [`Table::ALL`] order.
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// Plans one read-only SQL statement: a query, `EXPLAIN`, `DESCRIBE` or
    /// `SHOW`. Statements that would change anything (DDL, DML, `COPY`,
    /// `SET`) fail with [`SessionError::ReadOnly`]; bad SQL with [`SessionError::Query`];
    /// an unknown table with [`SessionError::UnknownTable`]. No file is read yet.
    pub async fn sql(&self, sql: &str) -> Result<DataFrame, Error> {
        // A query of `queries/` is named by its first line (`-- name: …`).
        tracing::trace!(query = sql.lines().next().unwrap_or_default(), "planning");
        let plan = self.plan(sql).await?;
        self.ctx.execute_logical_plan(plan).await.map_err(|e| self.plan_error(e).into())
    }

    /// [`Session::sql`] with `$1`-style or `$name` parameters bound to
    /// `params` (never formatted into the SQL text).
    pub async fn sql_with_params(
        &self,
        sql: &str,
        params: impl Into<ParamValues>,
    ) -> Result<DataFrame, Error> {
        self.sql(sql).await?.with_param_values(params).map_err(|e| self.plan_error(e).into())
    }

    /// [`Session::sql_with_params`] over the minute tables as the ledger
    /// reads them (`queries/ledger_*.sql`): the same files, write-ahead log
    /// and derived minutes, with every text column as `Utf8View`
    /// ([`table_schema::ledger_file_schema`]). Only those three tables are there.
    pub(crate) async fn ledger_sql_with_params(
        &self,
        sql: &str,
        params: impl Into<ParamValues>,
    ) -> Result<DataFrame, Error> {
        let ledger = self.ledger.context()?;
        let df = ledger.sql_with_options(sql, read_only()).await.map_err(|e| self.plan_error(e))?;
        df.with_param_values(params).map_err(|e| self.plan_error(e).into())
    }

    /// Runs `df` and returns its schema and every row.
    pub async fn collect(&self, df: DataFrame) -> Result<(SchemaRef, Vec<RecordBatch>), Error> {
        let schema = Arc::clone(df.schema().inner());
        let mut batches = Vec::new();
        self.run(df, |batch| {
            batches.push(batch);
            Ok(())
        })
        .await?;
        Ok((schema, batches))
    }

    /// Runs `df` and returns its batches in the order of the plan's output
    /// partitions, each partition's in its order: for a plain scan, the
    /// files' rows in the order the files are listed and hold them (where
    /// [`Session::collect`] interleaves the partitions as they come). The
    /// partitions still run at once.
    pub async fn collect_in_order(&self, df: DataFrame) -> Result<Vec<RecordBatch>, Error> {
        let task_ctx = Arc::new(df.task_ctx());
        let mut files = None;
        let ran = panic_guard::contain(async {
            let plan = df.create_physical_plan().await?;
            files = Some(scanned_objects(&plan));
            let partitions = collect_partitioned(plan, task_ctx).await?;
            Ok::<Vec<RecordBatch>, DataFusionError>(partitions.into_iter().flatten().collect())
        })
        .await;
        match ran {
            Ok(Ok(batches)) => Ok(batches),
            Ok(Err(err)) => Err(self.execute_error(err, files.as_deref()).await.into()),
            Err(panic) => Err(self.execute_error(reader_panicked(panic), files.as_deref()).await.into()),
        }
    }

    /// Runs `df` and returns every row in one batch, with the schema the
    /// rows came with (the engine may pick `Utf8View` where the plan says
    /// `Utf8`).
    pub async fn collect_batch(&self, df: DataFrame) -> Result<RecordBatch, Error> {
        let (schema, batches) = self.collect(df).await?;
        let schema = batches.first().map_or(schema, RecordBatch::schema);
        Ok(concat_batches(&schema, &batches).map_err(|e| SessionError::Execute { source: e.into() })?)
    }

    /// Runs `df` and writes its rows to `out` in `format`, batch by batch
    /// where the format allows. When it returns `Ok`, every row is written
    /// and `out` flushed.
    pub async fn print<W: Write>(&self, df: DataFrame, format: Format, out: W) -> Result<W, Error> {
        let schema = Arc::clone(df.schema().inner());
        let mut writer = BatchWriter::new(format, schema, out);
        self.run(df, |batch| writer.write(&batch)).await?;
        writer.finish()
    }

    /// Runs `df`, handing each batch to `sink` as the engine yields it
    /// (nothing is collected first); the first error of `sink` stops the
    /// query and is returned as is. When it returns `Ok`, every batch was
    /// handed over.
    pub async fn each_batch(
        &self,
        df: DataFrame,
        sink: impl FnMut(RecordBatch) -> Result<(), Error>,
    ) -> Result<(), Error> {
        self.run(df, sink).await
    }

    /// The SQL dialect the session parses statements in.
    pub fn dialect(&self) -> Box<dyn Dialect> {
        let name = self.ctx.state().config().options().sql_parser.dialect;
        dialect_from_str(name.as_ref()).unwrap_or_else(|| Box::new(GenericDialect {}))
    }

    /// Plans and runs `df`, handing each batch to `sink` as it comes. A
    /// failure of the engine (a panic of a reader included) is reported
    /// through [`Session::execute_error`], which looks for the file at fault
    /// among the files the plan reads.
    async fn run(
        &self,
        df: DataFrame,
        mut sink: impl FnMut(RecordBatch) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let task_ctx = Arc::new(df.task_ctx());
        // Known once the plan is made; a failure before that (reading the
        // footers for statistics) has every file under suspicion.
        let mut files = None;
        let ran = panic_guard::contain(async {
            let plan = df.create_physical_plan().await?;
            files = Some(scanned_objects(&plan));
            let mut stream = execute_stream(plan, task_ctx)?;
            while let Some(batch) = stream.next().await {
                if let Err(err) = sink(batch?) {
                    return Ok(Err(err));
                }
            }
            Ok(Ok(()))
        })
        .await;
        match ran {
            Ok(Ok(sunk)) => sunk,
            Ok(Err(err)) => Err(self.execute_error(err, files.as_deref()).await.into()),
            Err(panic) => Err(self.execute_error(reader_panicked(panic), files.as_deref()).await.into()),
        }
    }

    /// `objects` (as the engine names them) that are files under the local
    /// data folder, as paths under the data folder as the user gave it.
    fn local_paths(&self, objects: &[ObjectMeta]) -> Vec<PathBuf> {
        let Ok(root) = object_store::path::Path::from_absolute_path(&self.root) else {
            return Vec::new();
        };
        objects
            .iter()
            .filter_map(|meta| {
                let parts = meta.location.prefix_match(&root)?;
                let mut path = self.layout.root().to_path_buf();
                path.extend(parts.map(|p| p.as_ref().to_owned()));
                Some(path)
            })
            .collect()
    }

    /// Parses `sql`, refuses anything but a read, and plans it.
    async fn plan(&self, sql: &str) -> Result<LogicalPlan, Error> {
        let state = self.ctx.state();
        let dialect = state.config().options().sql_parser.dialect;
        let statement =
            state.sql_to_statement(sql, &dialect).map_err(|source| SessionError::Query { source })?;
        if let Some(statement) = refused(&statement) {
            return Err(SessionError::ReadOnly { statement }.into());
        }
        self.file_tables.prepare(&state, &statement).await?;
        let plan = state.statement_to_plan(statement).await.map_err(|e| self.plan_error(e))?;
        // The check above works on the statement's form; this one on what it
        // plans to, so nothing that writes slips through.
        read_only().verify_plan(&plan).map_err(|e| SessionError::ReadOnly {
            statement: e.message().rsplit(": ").next().unwrap_or("this statement").to_owned(),
        })?;
        Ok(plan)
    }

    /// An error of parsing or planning: an unknown table is named with the
    /// tables that are present, anything else is an invalid query.
    fn plan_error(&self, err: DataFusionError) -> SessionError {
        match missing_table(&err) {
            // A path: a file named in place of a table that is not there.
            Some(name) if Path::new(&name).is_file() => SessionError::FileTableFormat { name },
            Some(name) if looks_like_a_file(&name) => {
                SessionError::NoFileTable { name, cwd: std::env::current_dir().unwrap_or_default() }
            }
            Some(name) => SessionError::UnknownTable {
                name,
                data: self.layout.root().to_path_buf(),
                present: self.tables.iter().map(|t| t.name().to_owned()).collect(),
            },
            None => SessionError::Query { source: err },
        }
    }

    /// An error while the query ran. One past the memory limit, or one
    /// that could not write its spill folder, says so ([`crate::session::memory`]).
    /// A listing that met a zero-byte data file ([`crate::session::local_files`]) names it. The engine's other errors seldom
    /// say which file failed, so the footers of the files the query read (`files`, or
    /// every file of the data folder when the plan was not made) are checked
    /// and a broken one is named; when the failure was in decoding rows, the
    /// rows of those files are decoded to find the damaged one. Otherwise
    /// the engine's error is given as is.
    async fn execute_error(&self, err: DataFusionError, files: Option<&[ObjectMeta]>) -> SessionError {
        // Not a file's fault: no file is checked, and the engine's list of
        // memory consumers goes to the debug log, not into the line.
        if memory::is_exhausted(&err) {
            tracing::debug!(limit = %self.memory, error = %err, "the query did not fit in the memory limit");
            return SessionError::MemoryLimit { limit: self.memory };
        }
        let tmp = std::env::temp_dir();
        if memory::is_spill_failure(&err, &self.ctx.runtime_env().disk_manager.temp_dir_paths(), &tmp) {
            return SessionError::Spill { dir: tmp, limit: self.memory, source: err };
        }
        if let Some(bucket) = &self.bucket {
            // The objects the query read, else every object of the tables
            // (within the period): the first one whose footer or schema is
            // unreadable is named by its URL.
            let objects = match files {
                Some(files) => {
                    files.iter().filter_map(|m| Some((bucket.table_of(&m.location)?, m.clone()))).collect()
                }
                None => bucket.data_objects(&self.tables).await,
            };
            return match bucket.find_bad_object(&objects).await {
                Some(found) => {
                    tracing::debug!(error = %err, "the query failed on a bad object");
                    found
                }
                None => SessionError::Execute { source: err },
            };
        }
        if let Some(path) = crate::session::local_files::empty_file_in(&err) {
            // The store names the file under the canonical folder; the
            // message names it under the folder as the user gave it.
            let path = match path.strip_prefix(&self.root) {
                Ok(rel) => self.layout.root().join(rel),
                Err(_) => path,
            };
            return SessionError::EmptyFile { path };
        }
        let found = match files.map(|f| self.local_paths(f)) {
            Some(files) => integrity::find_bad_file_among(&self.layout, &files)
                .or_else(|| if is_decode_failure(&err) { integrity::find_undecodable(&files) } else { None }),
            None => integrity::find_bad_file(&self.layout, &self.tables),
        };
        match found {
            Some(found) => {
                tracing::debug!(error = %err, "the query failed on a bad file");
                found
            }
            None => SessionError::Execute { source: err },
        }
    }
}

/// The files the scans of `plan` read (after partition pruning), each once,
/// sorted by location.
fn scanned_objects(plan: &Arc<dyn ExecutionPlan>) -> Vec<ObjectMeta> {
    let mut files: Vec<ObjectMeta> = Vec::new();
    let mut stack = vec![Arc::clone(plan)];
    while let Some(node) = stack.pop() {
        if let Some(scan) = node.downcast_ref::<DataSourceExec>()
            && let Some(config) = scan.data_source().downcast_ref::<FileScanConfig>()
        {
            files.extend(config.file_groups.iter().flat_map(|g| g.files()).map(|f| f.object_meta.clone()));
        }
        stack.extend(node.children().into_iter().cloned());
    }
    files.sort_by(|a, b| a.location.cmp(&b.location));
    files.dedup_by(|a, b| a.location == b.location);
    files
}

/// A panic caught while a query ran, as the error it should have been.
#[derive(Debug, thiserror::Error)]
#[error("a reader panicked: {0}")]
struct ReaderPanic(String);

fn reader_panicked(message: String) -> DataFusionError {
    DataFusionError::External(Box::new(ReaderPanic(message)))
}

/// True when `err` comes from decoding Parquet data (or from a reader that
/// panicked), as opposed to a bad cast, a division by zero or a full disk.
fn is_decode_failure(err: &DataFusionError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        let decode = e.is::<ParquetError>()
            || e.is::<ReaderPanic>()
            || matches!(e.downcast_ref::<DataFusionError>(), Some(DataFusionError::ParquetError(_)))
            || matches!(e.downcast_ref::<ArrowError>(), Some(ArrowError::ParquetError(_)));
        if decode {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The session settings for apron's data (small, sorted, well-described
/// Parquet files with statistics and page indexes) under the memory limit
/// `memory`.
fn session_config(memory: MemoryLimit) -> SessionConfig {
    let config = SessionConfig::new()
        // SHOW TABLES, SHOW COLUMNS and information_schema for the curious.
        .with_information_schema(true)
        // Row-group and page statistics prune most of a time-range query;
        // file statistics answer count(*) without reading the rows.
        .with_collect_statistics(true)
        .with_parquet_pruning(true)
        .with_parquet_page_index_pruning(true)
        // Evaluate filters while decoding, so rows that fail them are never
        // materialised (the files are sorted by gpu_uuid, ts).
        .set_bool("datafusion.execution.parquet.pushdown_filters", true)
        .set_bool("datafusion.execution.parquet.reorder_filters", true);
    memory::spill_settings(config, memory)
}

/// What the ledger's context is built from on first use.
struct LedgerInputs {
    /// The session's runtime: its memory pool, object stores and spill folder.
    runtime: Arc<RuntimeEnv>,
    memory: MemoryLimit,
    parquet_options: TableParquetOptions,
    /// For the paths errors name.
    layout: DataLayout,
    tables: Vec<LedgerTable>,
}

/// One of [`LEDGER_TABLES`] as the session found it when opened.
struct LedgerTable {
    table: Table,
    /// Its folder, when the data folder has one, or its bucket URL.
    files: Option<ListingAt>,
    /// Its rows in the write-ahead log, as the log holds them.
    wal: Vec<RecordBatch>,
    /// The minutes computed from raw partitions without rollups.
    derived: Option<LogicalPlan>,
}

/// Where a table's Parquet files are listed.
enum ListingAt {
    Folder(PathBuf),
    Url(String),
}

/// The ledger's DataFusion context, built by the first query that needs it.
struct LazyLedger {
    inputs: LedgerInputs,
    built: std::sync::Mutex<Option<SessionContext>>,
}

impl LazyLedger {
    fn new(
        runtime: Arc<RuntimeEnv>,
        memory: MemoryLimit,
        parquet_options: TableParquetOptions,
        layout: &DataLayout,
        tables: Vec<LedgerTable>,
    ) -> Self {
        let inputs = LedgerInputs { runtime, memory, parquet_options, layout: layout.clone(), tables };
        LazyLedger { inputs, built: std::sync::Mutex::new(None) }
    }

    /// The context (a handle onto shared state), built now if not before.
    /// A failed build is not kept: the next query tries again.
    fn context(&self) -> Result<SessionContext, Error> {
        let mut built = self.built.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(ctx) = built.as_ref() {
            return Ok(ctx.clone());
        }
        let ctx = self.build()?;
        *built = Some(ctx.clone());
        Ok(ctx)
    }

    /// The three minute tables with their text as `Utf8View`: the same
    /// files, write-ahead log rows (cast) and derived minutes as the
    /// session's own tables.
    fn build(&self) -> Result<SessionContext, Error> {
        let inputs = &self.inputs;
        let ledger =
            SessionContext::new_with_config_rt(session_config(inputs.memory), Arc::clone(&inputs.runtime));
        for one in &inputs.tables {
            let table = one.table;
            let register_err = |source| SessionError::Register {
                table: table.name().to_owned(),
                path: inputs.layout.table_dir(table),
                source,
            };
            let format = ParquetFormat::default().with_options(inputs.parquet_options.clone());
            let schema = ledger_file_schema(table);
            let files = match &one.files {
                None => None,
                Some(ListingAt::Folder(dir)) => Some(listing_table(dir, schema, format)),
                Some(ListingAt::Url(url)) => Some(bucket_listing(url, schema, format)),
            };
            let files =
                files.transpose().map_err(register_err)?.map(|l| Arc::new(l) as Arc<dyn TableProvider>);
            let full = ledger_full_schema(table);
            let wal = conformed(&one.wal, &full).map_err(register_err)?;
            let parts = TableParts { files, wal: &wal, derived: one.derived.clone() };
            if let Some(provider) = table_provider(table, parts, full).map_err(register_err)? {
                ledger.register_table(table.name(), provider).map_err(register_err)?;
            }
        }
        Ok(ledger)
    }
}

/// The listing of a table's data files under `url` (a bucket's folder).
fn bucket_listing(
    url: &str,
    schema: SchemaRef,
    format: ParquetFormat,
) -> Result<ListingTable, DataFusionError> {
    let url = url::Url::parse(url).map_err(|e| DataFusionError::External(Box::new(e)))?;
    listing_table_at(ListingTableUrl::try_new(url, Some(data_file_glob()?))?, schema, format)
}

/// The sources of one table, each optional.
struct TableParts<'a> {
    /// The Parquet listing of the table's folder.
    files: Option<Arc<dyn TableProvider>>,
    /// Rows a recorder holds in its write-ahead log (for the minute tables:
    /// their rollups).
    wal: &'a [RecordBatch],
    /// Minute tables only: the minutes computed from raw partitions that
    /// have no rollups ([`crate::session::minute_tables`]).
    derived: Option<LogicalPlan>,
}

/// Registers `alloc_minutes` and `proc_minutes` empty where the data has
/// none (recorded outside a cluster, or before allocations were recorded;
/// GPUs on which no process ever ran): every GPU-minute then is held by its
/// processes alone, or by its allocations alone, and the views that read
/// both still run. `gpu_events` likewise, where no GPU had an event (or the
/// data was recorded before events were). They are not among the tables
/// present.
fn register_absent_minute_tables(ctx: &SessionContext, present: &[Table]) -> Result<(), DataFusionError> {
    for table in [Table::ProcMinutes, Table::AllocMinutes, Table::GpuEvents] {
        if present.contains(&table) {
            continue;
        }
        let empty = MemTable::try_new(full_schema(table), vec![Vec::new()])?;
        ctx.register_table(table.name(), Arc::new(empty))?;
    }
    Ok(())
}

/// What a table name resolves to: the union of its parts (a union, so
/// filters still reach the listing and prune folders); `None` when it has
/// none.
fn table_provider(
    table: Table,
    parts: TableParts<'_>,
    full_schema: SchemaRef,
) -> Result<Option<Arc<dyn TableProvider>>, DataFusionError> {
    let mut plans = Vec::new();
    if let Some(files) = &parts.files {
        if parts.wal.is_empty() && parts.derived.is_none() {
            return Ok(Some(Arc::clone(files)));
        }
        plans.push(
            LogicalPlanBuilder::scan(table.name(), provider_as_source(Arc::clone(files)), None)?.build()?,
        );
    }
    if !parts.wal.is_empty() {
        let wal: Arc<dyn TableProvider> = Arc::new(MemTable::try_new(full_schema, vec![parts.wal.to_vec()])?);
        plans.push(LogicalPlanBuilder::scan(table.name(), provider_as_source(wal), None)?.build()?);
    }
    if let Some(derived) = parts.derived {
        plans.push(derived);
    }
    let mut plans = plans.into_iter();
    let Some(first) = plans.next() else { return Ok(None) };
    let mut builder = LogicalPlanBuilder::from(first);
    for plan in plans {
        builder = builder.union(plan)?;
    }
    Ok(Some(Arc::new(ViewTable::new(builder.build()?, None))))
}

/// A Hive-partitioned Parquet listing of `table` over the folder `dir`
/// (absolute), with the table's canonical schema.
fn listing_table(
    dir: &Path,
    schema: SchemaRef,
    format: ParquetFormat,
) -> Result<ListingTable, DataFusionError> {
    // Built from the path, not parsed as text, so characters such as `*` or
    // `[` in a folder name are not taken for a glob.
    let url = url::Url::from_directory_path(dir).map_err(|()| {
        DataFusionError::Configuration(format!("{} is not an absolute folder path", dir.display()))
    })?;
    listing_table_at(ListingTableUrl::try_new(url, Some(data_file_glob()?))?, schema, format)
}

/// The names a table listing reads ([`DATA_FILE_GLOB`]).
fn data_file_glob() -> Result<glob::Pattern, DataFusionError> {
    glob::Pattern::new(DATA_FILE_GLOB).map_err(|e| DataFusionError::External(Box::new(e)))
}

/// A Hive-partitioned Parquet listing of `table` at `url` (a folder), with
/// the table's canonical schema.
fn listing_table_at(
    url: ListingTableUrl,
    schema: SchemaRef,
    format: ParquetFormat,
) -> Result<ListingTable, DataFusionError> {
    let options = ListingOptions::new(Arc::new(format))
        .with_file_extension(DATA_FILE_EXTENSION)
        .with_table_partition_cols(partition_columns());
    let config = ListingTableConfig::new(url).with_listing_options(options).with_schema(schema);
    ListingTable::try_new(config)
}

/// The tables the ledger reads through [`Session::ledger_sql_with_params`].
const LEDGER_TABLES: [Table; 3] = [Table::GpuMinutes, Table::ProcMinutes, Table::AllocMinutes];

/// `batches` (rows of a table's [`full_schema`]) with their columns cast
/// to `schema`'s types.
fn conformed(batches: &[RecordBatch], schema: &SchemaRef) -> Result<Vec<RecordBatch>, DataFusionError> {
    let batch = |b: &RecordBatch| {
        let columns = b
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(c, f)| datafusion::arrow::compute::cast(c, f.data_type()))
            .collect::<Result<Vec<_>, _>>()?;
        RecordBatch::try_new(Arc::clone(schema), columns)
    };
    batches
        .iter()
        .map(batch)
        .collect::<Result<_, _>>()
        .map_err(|e| DataFusionError::ArrowError(Box::new(e), None))
}

/// The options that make a plan read-only.
fn read_only() -> SQLOptions {
    SQLOptions::new().with_allow_ddl(false).with_allow_dml(false).with_allow_statements(false)
}

/// The leading keywords of `statement` when it is not a read (`INSERT`,
/// `CREATE TABLE`, `SET`), `None` for a query, `EXPLAIN`, `DESCRIBE`, `SHOW`.
fn refused(statement: &DfStatement) -> Option<String> {
    match statement {
        DfStatement::Statement(s) => refused_sql(s),
        DfStatement::Explain(explain) => refused(&explain.statement),
        DfStatement::CreateExternalTable(_) => Some("CREATE EXTERNAL TABLE".to_owned()),
        DfStatement::CopyTo(_) => Some("COPY".to_owned()),
        DfStatement::Reset(_) => Some("RESET".to_owned()),
    }
}

fn refused_sql(statement: &SqlStatement) -> Option<String> {
    match statement {
        SqlStatement::Query(_)
        | SqlStatement::ExplainTable { .. }
        | SqlStatement::ShowTables { .. }
        | SqlStatement::ShowColumns { .. }
        | SqlStatement::ShowVariable { .. }
        | SqlStatement::ShowVariables { .. }
        | SqlStatement::ShowFunctions { .. }
        | SqlStatement::ShowStatus { .. }
        | SqlStatement::ShowCreate { .. }
        | SqlStatement::ShowSchemas { .. }
        | SqlStatement::ShowCollation { .. } => None,
        SqlStatement::Explain { statement, .. } => refused_sql(statement),
        other => Some(leading_keywords(&other.to_string())),
    }
}

/// The words that say what a statement does: the first, and for CREATE,
/// DROP and the like the kind of object (`CREATE OR REPLACE VIEW`).
fn leading_keywords(sql: &str) -> String {
    const OBJECT_WORDS: &[&str] = &[
        "OR",
        "REPLACE",
        "EXTERNAL",
        "TEMPORARY",
        "TEMP",
        "UNBOUNDED",
        "MATERIALIZED",
        "UNIQUE",
        "TABLE",
        "VIEW",
        "SCHEMA",
        "DATABASE",
        "CATALOG",
        "FUNCTION",
        "INDEX",
    ];
    let mut words = sql.split_whitespace();
    let Some(first) = words.next() else {
        return "this statement".to_owned();
    };
    let mut name = first.to_uppercase();
    if matches!(name.as_str(), "CREATE" | "DROP" | "ALTER" | "TRUNCATE") {
        for word in words {
            let word = word.to_uppercase();
            if !OBJECT_WORDS.contains(&word.as_str()) {
                break;
            }
            name.push(' ');
            name.push_str(&word);
        }
    }
    name
}

/// Whether a table name the engine did not find is a file's path: a
/// folder in it, or the extension of a file the engine reads.
fn looks_like_a_file(name: &str) -> bool {
    const EXTENSIONS: &[&str] = &["parquet", "csv", "tsv", "json", "ndjson", "jsonl", "arrow", "avro"];
    name.contains('/')
        || name.rsplit_once('.').is_some_and(|(_, ext)| EXTENSIONS.contains(&ext.to_lowercase().as_str()))
}

/// The table a planning error says is missing, as the query spelled it.
fn missing_table(err: &DataFusionError) -> Option<String> {
    let message = &err.diagnostic()?.message;
    let name = message.strip_prefix("table '")?.strip_suffix("' not found")?;
    Some(name.to_owned())
}

pub mod fence;
mod file_tables;
pub mod integrity;
mod local_files;
pub mod memory;
pub mod minute_tables;
pub mod object_storage;
pub mod panic_guard;
pub mod queries;
mod read_only;
pub mod recent;
mod steady;
pub mod table_schema;

pub use object_storage::Days;

#[cfg(test)]
mod tests;
