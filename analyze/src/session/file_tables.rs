//! `read_parquet('x.parquet')` and `read_csv('x.csv')`: a file the user
//! names read as a table, its format given by the function rather than by
//! the extension (`FROM 'x.parquet'` takes it from the extension; see the
//! session). Reading only, as every table of the session.
//!
//! The engine calls a table function while it plans, where nothing can
//! wait for the file system, so [`FileTables::prepare`] first finds the
//! calls in the statement and opens each file (its listing and schema),
//! and the function then hands out what was prepared for its path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::SessionError;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{ScalarValue, plan_err};
use datafusion::datasource::file_format::FileFormat;
use datafusion::datasource::file_format::csv::CsvFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl};
use datafusion::error::DataFusionError;
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::Expr;
use datafusion::prelude::SessionContext;
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, FunctionArg, FunctionArgExpr, TableFactor, Value, ValueWithSpan, Visit, Visitor,
};

/// The file formats a function reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Parquet,
    Csv,
}

impl Kind {
    const ALL: [Kind; 2] = [Kind::Parquet, Kind::Csv];

    /// The function's name in SQL.
    fn function(self) -> &'static str {
        match self {
            Kind::Parquet => "read_parquet",
            Kind::Csv => "read_csv",
        }
    }

    /// The usual extension of its files.
    fn extension(self) -> &'static str {
        match self {
            Kind::Parquet => "parquet",
            Kind::Csv => "csv",
        }
    }

    /// The format, with the session's options (a CSV file has a header
    /// line, as `apron sql --out x.csv` writes it).
    fn format(self, state: &SessionState) -> Arc<dyn FileFormat> {
        let options = state.default_table_options();
        match self {
            Kind::Parquet => Arc::new(ParquetFormat::default().with_options(options.parquet)),
            Kind::Csv => Arc::new(CsvFormat::default().with_options(options.csv).with_has_header(true)),
        }
    }
}

/// The files the functions of one session read, opened before planning.
#[derive(Debug, Default)]
pub(crate) struct FileTables {
    prepared: Mutex<HashMap<(Kind, String), Arc<dyn TableProvider>>>,
}

impl FileTables {
    /// Registers `read_parquet` and `read_csv` in `ctx`, reading what the
    /// returned tables prepare.
    pub(crate) fn register(ctx: &SessionContext) -> Arc<Self> {
        let tables = Arc::new(Self::default());
        for kind in Kind::ALL {
            ctx.register_udtf(kind.function(), Arc::new(ReadFile { kind, tables: Arc::clone(&tables) }));
        }
        tables
    }

    /// Opens every file `statement` reads through `read_parquet('…')` or
    /// `read_csv('…')` (a path in quotes, relative to the working folder).
    /// A file that cannot be opened is an error naming it.
    pub(crate) async fn prepare(
        &self,
        state: &SessionState,
        statement: &DfStatement,
    ) -> Result<(), SessionError> {
        let DfStatement::Statement(statement) = statement else { return Ok(()) };
        let mut calls = Calls::default();
        let _ = statement.visit(&mut calls);
        for (kind, path) in calls.found {
            if self
                .prepared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains_key(&(kind, path.clone()))
            {
                continue;
            }
            let table = open(state, kind, &path).await.map_err(|source| SessionError::FileTable {
                function: kind.function(),
                path: path.clone(),
                source,
            })?;
            self.prepared.lock().unwrap_or_else(PoisonError::into_inner).insert((kind, path), table);
        }
        Ok(())
    }
}

/// The file at `path` as a table in `kind`'s format, its schema read from
/// the file.
async fn open(
    state: &SessionState,
    kind: Kind,
    path: &str,
) -> Result<Arc<dyn TableProvider>, DataFusionError> {
    let url = ListingTableUrl::parse(path)?;
    // Any name: the function says what the file is.
    let options = ListingOptions::new(kind.format(state)).with_file_extension("");
    let config = ListingTableConfig::new(url).with_listing_options(options).infer_schema(state).await?;
    Ok(Arc::new(ListingTable::try_new(config)?))
}

/// The calls of the functions in a statement: (kind, path in quotes).
#[derive(Debug, Default)]
struct Calls {
    found: Vec<(Kind, String)>,
}

impl Visitor for Calls {
    type Break = ();

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> std::ops::ControlFlow<()> {
        if let TableFactor::Table { name, args: Some(args), .. } = factor {
            let name = name.to_string().to_lowercase();
            let kind = Kind::ALL.into_iter().find(|k| k.function() == name);
            if let (Some(kind), [FunctionArg::Unnamed(FunctionArgExpr::Expr(SqlExpr::Value(value)))]) =
                (kind, args.args.as_slice())
            {
                let ValueWithSpan { value, .. } = value;
                if let Value::SingleQuotedString(path) | Value::DoubleQuotedString(path) = value {
                    self.found.push((kind, path.clone()));
                }
            }
        }
        std::ops::ControlFlow::Continue(())
    }
}

/// `read_parquet` or `read_csv`: hands out the table prepared for its path.
#[derive(Debug)]
struct ReadFile {
    kind: Kind,
    tables: Arc<FileTables>,
}

impl TableFunctionImpl for ReadFile {
    fn call_with_args(
        &self,
        args: TableFunctionArgs<'_, '_>,
    ) -> datafusion::common::Result<Arc<dyn TableProvider>> {
        let function = self.kind.function();
        let path = match args.exprs() {
            [Expr::Literal(ScalarValue::Utf8(Some(p)) | ScalarValue::Utf8View(Some(p)), _)] => p,
            _ => {
                return plan_err!(
                    "{function} takes one file path in quotes, e.g. {function}('result.{}')",
                    self.kind.extension()
                );
            }
        };
        let prepared = self.tables.prepared.lock().unwrap_or_else(PoisonError::into_inner);
        match prepared.get(&(self.kind, path.clone())) {
            Some(table) => Ok(Arc::clone(table)),
            None => {
                plan_err!("{function}('{path}'): the path must be written in quotes, as the argument alone")
            }
        }
    }
}
