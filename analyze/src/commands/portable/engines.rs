//! apron's definitions on another engine: Apache Spark, Trino or Amazon
//! Athena, over the same Parquet files.
//!
//! [`statement`] writes one SQL statement that computes a report (spend,
//! idle cost, or every priced GPU-minute) from the same `queries/*.sql`
//! apron runs: `gpu_minute_states.sql`, `proc_minute_states.sql` and
//! `minute_costs.sql` become common table expressions in front of the
//! report's own file, with `cost_buckets` as `minute_costs` itself (the
//! reports sum it at a bucket or coarser, so they read the same). Nothing is
//! copied by hand: the files are parsed and rewritten.
//!
//! - The period's bounds become literals (`TIMESTAMP '2026-11-01
//!   00:00:00Z'`, and `DATE '2026-11-01'` where a file casts a bound to a
//!   date for partition pruning). The config's numbers (idle threshold,
//!   energy price, PUE) become reads of the table `apron_settings`; the
//!   prices and team rules are already joins on `apron_gpu_rates` and
//!   `apron_team_rules` ([`crate::config::tables`], written by `apron
//!   export-config`).
//! - Decimal literals get an exponent (`3600.0E0`): Spark and Trino read
//!   `1.0` as a DECIMAL, whose division rounds (`1.0 / 3` is `0.333333` on
//!   Spark); with it they are DOUBLE, as in DataFusion.
//! - Tables are qualified with the schema `apron ddl` creates.
//! - For Spark, identifiers are quoted with backticks and `VARCHAR` is
//!   `STRING`.
//!
//! [`ddl`] writes the statements that create the tables those statements
//! read, with the partitions discovered.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::ops::ControlFlow;

use apron_schemas::Table;
use chrono::{DateTime, Utc};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::sql::sqlparser::ast::{
    self, Cte, Expr, Ident, ObjectName, ObjectNamePart, Query, Statement, Value, VisitMut, VisitorMut, With,
};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::parser::Parser;

use crate::config::tables;
use crate::error::{Error, InputError};
use crate::report::figures::idle_cost::IdleBy;
use crate::report::period::Period;
use crate::session::queries;

/// An engine that reads apron's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Engine {
    /// Apache Spark SQL (3.4 or later; tested with 4).
    Spark,
    /// Trino, with its Hive connector.
    Trino,
    /// Amazon Athena (engine version 3).
    Athena,
}

/// What [`statement`] computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortableQuery {
    /// `queries/spend.sql`: cost per team.
    Spend,
    /// `queries/idle_cost.sql`: idle cost by team, user, host or GPU.
    IdleCost(IdleBy),
    /// `queries/minute_costs.sql` itself: every GPU-minute, priced and
    /// attributed, for any other sum.
    MinuteCosts,
}

/// What a placeholder of a query file stands for.
#[derive(Debug, Clone, Copy)]
enum Bound {
    /// The period's start.
    Start,
    /// The period's end.
    End,
    /// A column of `apron_settings`.
    Setting(&'static str),
    /// A text.
    Text(&'static str),
}

/// One query file with what its placeholders stand for, in order.
struct File {
    name: &'static str,
    sql: &'static str,
    params: Vec<Bound>,
}

/// The views every cost report is computed from, in the order they read
/// each other, with their placeholders as `crate::config::pricing` binds them.
fn views() -> [File; 4] {
    [
        File {
            name: "alloc_minute_states",
            sql: queries::ALLOC_MINUTE_STATES,
            params: vec![Bound::Start, Bound::End],
        },
        File {
            name: "gpu_minute_states",
            sql: queries::GPU_MINUTE_STATES,
            params: vec![Bound::Start, Bound::End, Bound::Setting("idle_threshold_pct")],
        },
        File {
            name: "proc_minute_states",
            sql: queries::PROC_MINUTE_STATES,
            params: vec![Bound::Start, Bound::End],
        },
        File {
            name: "minute_costs",
            sql: queries::MINUTE_COSTS,
            params: vec![Bound::Setting("price_per_kwh"), Bound::Setting("pue")],
        },
    ]
}

/// The SQL statement computing `report` over `period` on `engine`, reading
/// the tables of `schema` (as [`ddl`] creates them), ended by `;`, after a
/// comment saying what it is.
pub fn statement(
    report: PortableQuery,
    engine: Engine,
    schema: &str,
    period: &Period,
) -> Result<String, Error> {
    check_schema(schema)?;
    let (name, outer) = match report {
        PortableQuery::Spend => ("spend", File { name: "spend", sql: queries::SPEND, params: vec![] }),
        PortableQuery::IdleCost(by) => (
            "idle_cost",
            File { name: "idle_cost", sql: queries::IDLE_COST, params: vec![Bound::Text(by.name())] },
        ),
        PortableQuery::MinuteCosts => {
            ("minute_costs", File { name: "minute_costs", sql: "SELECT * FROM minute_costs", params: vec![] })
        }
    };
    let mut ctes: Vec<Cte> = Vec::new();
    for file in views() {
        let mut query = parse(&file, engine, period);
        if let Some(with) = query.with.take() {
            ctes.extend(with.cte_tables);
        }
        ctes.push(cte(file.name, query));
    }
    if !matches!(report, PortableQuery::MinuteCosts) {
        let buckets = File { name: "cost_buckets", sql: "SELECT * FROM minute_costs", params: vec![] };
        ctes.push(cte("cost_buckets", parse(&buckets, engine, period)));
    }
    let mut query = parse(&outer, engine, period);
    if let Some(with) = query.with.take() {
        ctes.extend(with.cte_tables);
    }
    let mut names = HashSet::new();
    for cte in &ctes {
        assert!(
            names.insert(cte.alias.name.value.clone()),
            "two queries name a CTE {}",
            cte.alias.name.value
        );
    }
    query.with = Some(With {
        with_token: ast::helpers::attached_token::AttachedToken::empty(),
        recursive: false,
        cte_tables: ctes,
    });
    let mut statement = Statement::Query(Box::new(query));
    let _ = statement.visit(&mut Qualify { schema });
    let text = match engine {
        Engine::Spark => backticks(&format!("{statement:#}")),
        Engine::Trino | Engine::Athena => format!("{statement:#}"),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "-- apron {}, {}, on {}: generated by apron {} from queries/gpu_minute_states.sql,\n\
         -- proc_minute_states.sql, minute_costs.sql and {name}.sql over the tables `apron ddl` creates.",
        match report {
            PortableQuery::Spend => "spend".to_owned(),
            PortableQuery::IdleCost(by) => format!("idle-cost --by {}", by.name()),
            PortableQuery::MinuteCosts => "minute-costs".to_owned(),
        },
        period.label(),
        engine_name(engine),
        env!("CARGO_PKG_VERSION"),
    );
    out.push_str(&text);
    out.push_str(";\n");
    Ok(out)
}

fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Spark => "spark",
        Engine::Trino => "trino",
        Engine::Athena => "athena",
    }
}

fn cte(name: &str, query: Query) -> Cte {
    Cte {
        alias: ast::TableAlias { explicit: false, name: Ident::new(name), columns: vec![], at: None },
        query: Box::new(query),
        from: None,
        materialized: None,
        closing_paren_token: ast::helpers::attached_token::AttachedToken::empty(),
    }
}

/// `file` parsed, its placeholders bound and its literals made portable.
fn parse(file: &File, engine: Engine, period: &Period) -> Query {
    let dialect = GenericDialect {};
    let mut statements = Parser::parse_sql(&dialect, file.sql)
        .unwrap_or_else(|e| panic!("queries/{}.sql does not parse: {e}", file.name));
    let Some(Statement::Query(query)) = statements.pop() else {
        panic!("queries/{}.sql is not one query", file.name)
    };
    let mut query = *query;
    let _ = query.visit(&mut Rewrite { file, engine, period });
    query
}

fn expr(text: &str) -> Expr {
    Parser::new(&GenericDialect {})
        .try_with_sql(text)
        .and_then(|mut p| p.parse_expr())
        .unwrap_or_else(|e| panic!("{text} does not parse: {e}"))
}

/// Binds a file's placeholders and makes its literals and types portable.
struct Rewrite<'a> {
    file: &'a File,
    engine: Engine,
    period: &'a Period,
}

impl Rewrite<'_> {
    fn bound(&self, placeholder: &str) -> Bound {
        let n: usize = placeholder.trim_start_matches('$').parse().unwrap_or(0);
        *n.checked_sub(1)
            .and_then(|i| self.file.params.get(i))
            .unwrap_or_else(|| panic!("queries/{}.sql: {placeholder} is not bound", self.file.name))
    }

    fn instant(&self, bound: Bound) -> Option<DateTime<Utc>> {
        let ms = match bound {
            Bound::Start => self.period.start_ms,
            Bound::End => self.period.end_ms,
            _ => return None,
        };
        DateTime::<Utc>::from_timestamp_millis(ms)
    }

    fn value(&self, bound: Bound) -> Expr {
        match bound {
            Bound::Start | Bound::End => {
                let t = self.instant(bound).expect("a period bound");
                let text = t.format("%Y-%m-%d %H:%M:%S%.3f");
                match self.engine {
                    // Spark reads the zone; Athena runs in UTC, Trino as its
                    // session's zone (README: set it to UTC).
                    Engine::Spark => expr(&format!("TIMESTAMP '{text}Z'")),
                    Engine::Trino | Engine::Athena => expr(&format!("TIMESTAMP '{text}'")),
                }
            }
            Bound::Setting(column) => expr(&format!("(SELECT {column} FROM {} LIMIT 1)", tables::NAMES[0])),
            Bound::Text(text) => expr(&format!("'{}'", text.replace('\'', "''"))),
        }
    }
}

impl VisitorMut for Rewrite<'_> {
    type Break = ();

    fn pre_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        match e {
            // CAST($1 AS DATE): the bound's UTC date, for pruning partitions.
            Expr::Cast { expr: inner, data_type: ast::DataType::Date, .. } => {
                if let Expr::Value(v) = inner.as_ref()
                    && let Value::Placeholder(p) = &v.value
                    && let Some(t) = self.instant(self.bound(p))
                {
                    *e = expr(&format!("DATE '{}'", t.format("%Y-%m-%d")));
                }
            }
            Expr::Cast { data_type, .. } if self.engine == Engine::Spark => {
                if matches!(data_type, ast::DataType::Varchar(None)) {
                    *data_type = ast::DataType::String(None);
                }
            }
            Expr::Value(v) => match &mut v.value {
                Value::Placeholder(p) => *e = self.value(self.bound(p)),
                Value::Number(n, _) if n.contains('.') && !n.contains(['e', 'E']) => n.push_str("E0"),
                _ => {}
            },
            // `date` is a keyword in every dialect: quoted.
            Expr::Identifier(ident)
                if ident.quote_style.is_none() && ident.value.eq_ignore_ascii_case("date") =>
            {
                ident.quote_style = Some('"');
            }
            Expr::CompoundIdentifier(idents) => {
                for ident in idents.iter_mut().filter(|i| i.quote_style.is_none() && i.value == "date") {
                    ident.quote_style = Some('"');
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Qualifies apron's tables (not the common table expressions) with a
/// schema.
struct Qualify<'a> {
    schema: &'a str,
}

impl VisitorMut for Qualify<'_> {
    type Break = ();

    fn pre_visit_relation(&mut self, relation: &mut ObjectName) -> ControlFlow<()> {
        if let [ObjectNamePart::Identifier(table)] = relation.0.as_slice()
            && is_base_table(&table.value)
        {
            relation.0.insert(0, ObjectNamePart::Identifier(Ident::new(self.schema)));
        }
        ControlFlow::Continue(())
    }
}

fn is_base_table(name: &str) -> bool {
    Table::from_name(name).is_some() || tables::NAMES.contains(&name)
}

/// `sql` with its double-quoted identifiers quoted with backticks instead
/// (Spark reads `"x"` as a string). sqlparser writes strings between single
/// quotes, doubling a quote inside, so a `"` outside them quotes a name.
fn backticks(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut in_string = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                in_string = !in_string;
                out.push(c);
            }
            '"' if !in_string => out.push('`'),
            _ => out.push(c),
        }
    }
    out
}

/// A schema name as the engines take it unquoted.
fn check_schema(schema: &str) -> Result<(), Error> {
    let ok = schema.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && schema.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(InputError::Usage {
            message: format!(
                "--schema {schema:?}: use lower-case letters, digits and '_', starting with a letter"
            ),
        }
        .into())
    }
}

/// The statements, each ended by `;` on its own line, that create `schema`
/// and in it apron's tables at `location` (a URL: `s3://BUCKET/PREFIX`,
/// `file:///data/apron`, or an absolute path) partitioned by `date` and
/// `host`, discover their partitions (not `alloc_minutes`' in a local
/// folder that has none), and create the three config tables
/// at `config_location` (default `LOCATION/apron_config`, where `apron
/// export-config --out` puts them).
pub fn ddl(
    engine: Engine,
    location: &str,
    config_location: Option<&str>,
    schema: &str,
) -> Result<String, Error> {
    check_schema(schema)?;
    let location = url(location, "--location")?;
    let config_location = match config_location {
        Some(c) => url(c, "--config-location")?,
        None => format!("{location}/apron_config"),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "-- apron's tables for {}: apron ddl --engine {} --location {location} --config-location {config_location}\n\
         -- Generated by apron {}.",
        engine_name(engine),
        engine_name(engine),
        env!("CARGO_PKG_VERSION"),
    );
    let create_schema = match engine {
        Engine::Spark | Engine::Athena => format!("CREATE DATABASE IF NOT EXISTS {schema};"),
        Engine::Trino => format!("CREATE SCHEMA IF NOT EXISTS {schema};"),
    };
    out.push_str(&create_schema);
    out.push('\n');
    for table in Table::ALL {
        let at = format!("{location}/{}", table.name());
        out.push_str(&create(engine, schema, table.name(), &table.schema(), &at, true));
        // `alloc_minutes` exists only where a cluster's allocations were
        // recorded, `gpu_events` only where a GPU had a fault; the engines'
        // partition repair fails on a folder that is not there (the table
        // itself reads as empty). Checked where the location is a local
        // folder; a bucket's prefix is taken as it is.
        let absent_because = match table {
            Table::AllocMinutes => Some("no Kubernetes or Slurm allocations recorded"),
            Table::GpuEvents => Some("no GPU event recorded"),
            _ => None,
        };
        if let Some(why) = absent_because
            && let Some(dir) = at.strip_prefix("file://")
            && !std::path::Path::new(dir).is_dir()
        {
            let _ = writeln!(
                out,
                "-- No {} folder yet ({why}): the table reads as empty; repair its partitions once the folder exists.",
                table.name()
            );
            continue;
        }
        let repair = match engine {
            Engine::Spark | Engine::Athena => format!("MSCK REPAIR TABLE {schema}.{};\n", table.name()),
            Engine::Trino => format!(
                "CALL system.sync_partition_metadata(schema_name => '{schema}', table_name => '{}', mode => 'FULL');\n",
                table.name()
            ),
        };
        out.push_str(&repair);
    }
    let config = crate::config::Config::default();
    for (name, batch) in tables::batches(&config) {
        let at = format!("{config_location}/{name}");
        out.push_str(&create(engine, schema, name, &batch.schema(), &at, false));
    }
    Ok(out)
}

/// `text` as a location URL without a trailing `/`, or a one-line error
/// naming `flag`.
fn url(text: &str, flag: &str) -> Result<String, Error> {
    let trimmed = text.trim_end_matches('/');
    let url = if trimmed.contains("://") {
        trimmed.to_owned()
    } else if trimmed.starts_with('/') {
        format!("file://{trimmed}")
    } else {
        return Err(InputError::Usage {
            message: format!(
                "{flag} {text:?}: give a URL the engine reads (s3://BUCKET/PREFIX, file:///data/apron) or an absolute path"
            ),
        }
        .into());
    };
    if url.contains('\'') {
        return Err(InputError::Usage {
            message: format!("{flag} {text:?}: a location cannot contain a quote (')"),
        }
        .into());
    }
    Ok(url)
}

/// One `CREATE TABLE` of `columns` at `location`, partitioned by `date` and
/// `host` when `partitioned`.
fn create(
    engine: Engine,
    schema: &str,
    name: &str,
    columns: &Schema,
    location: &str,
    partitioned: bool,
) -> String {
    let quote = |c: &str| match engine {
        Engine::Spark | Engine::Athena => format!("`{c}`"),
        Engine::Trino => format!("\"{c}\""),
    };
    let mut lines: Vec<String> = columns
        .fields()
        .iter()
        .map(|f| format!("  {} {}", quote(f.name()), column_type(engine, f.data_type())))
        .collect();
    // The partition columns as apron reads them from the folder names.
    let partitions = if partitioned { crate::session::table_schema::partition_columns() } else { Vec::new() };
    let typed = |sep: &str| -> Vec<String> {
        partitions.iter().map(|(c, t)| format!("{}{sep}{}", quote(c), column_type(engine, t))).collect()
    };
    if engine != Engine::Athena {
        lines.extend(typed(" ").iter().map(|l| format!("  {l}")));
    }
    let columns = lines.join(",\n");
    let names: Vec<String> = partitions.iter().map(|(c, _)| quote(c)).collect();
    match engine {
        Engine::Spark => {
            let by =
                if partitioned { format!("\nPARTITIONED BY ({})", names.join(", ")) } else { String::new() };
            format!(
                "CREATE TABLE IF NOT EXISTS {schema}.{name} (\n{columns}\n)\nUSING PARQUET{by}\nLOCATION '{location}';\n"
            )
        }
        Engine::Trino => {
            let quoted: Vec<String> = partitions.iter().map(|(c, _)| format!("'{c}'")).collect();
            let by = if partitioned {
                format!(",\n  partitioned_by = ARRAY[{}]", quoted.join(", "))
            } else {
                String::new()
            };
            format!(
                "CREATE TABLE IF NOT EXISTS {schema}.{name} (\n{columns}\n)\nWITH (\n  format = 'PARQUET',\n  \
                 external_location = '{location}'{by}\n);\n"
            )
        }
        Engine::Athena => {
            let by = if partitioned {
                format!("\nPARTITIONED BY ({})", typed(" ").join(", "))
            } else {
                String::new()
            };
            format!(
                "CREATE EXTERNAL TABLE IF NOT EXISTS {schema}.{name} (\n{columns}\n){by}\nSTORED AS PARQUET\n\
                 LOCATION '{location}/';\n"
            )
        }
    }
}

/// The engine's name for a column type of apron's tables.
fn column_type(engine: Engine, t: &DataType) -> &'static str {
    use Engine::{Athena, Spark, Trino};
    match (t, engine) {
        (DataType::Int32, Spark | Athena) => "INT",
        (DataType::Int32, Trino) => "INTEGER",
        (DataType::Int64, _) => "BIGINT",
        (DataType::Float32, Spark | Athena) => "FLOAT",
        (DataType::Float32, Trino) => "REAL",
        (DataType::Float64, _) => "DOUBLE",
        (DataType::Boolean, _) => "BOOLEAN",
        (DataType::Utf8, Spark | Athena) => "STRING",
        (DataType::Utf8, Trino) => "VARCHAR",
        (DataType::Date32, _) => "DATE",
        (DataType::Timestamp(_, _), Spark | Athena) => "TIMESTAMP",
        (DataType::Timestamp(_, _), Trino) => "TIMESTAMP(3)",
        (other, _) => unreachable!("apron's tables have no column of type {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn november() -> Period {
        Period { start_ms: 1_793_491_200_000, end_ms: 1_796_083_200_000 }
    }

    #[test]
    fn the_statement_binds_every_placeholder_and_keeps_no_decimal() {
        for engine in [Engine::Spark, Engine::Trino, Engine::Athena] {
            let sql =
                statement(PortableQuery::IdleCost(IdleBy::User), engine, "apron", &november()).expect("sql");
            assert!(!sql.contains('$'), "{sql}");
            assert!(sql.contains("DATE '2026-11-01'") && sql.contains("DATE '2026-12-01'"), "{sql}");
            assert!(sql.contains("apron.apron_team_rules") && sql.contains("apron.gpu_minutes"), "{sql}");
            assert!(!sql.contains("apron.gpu_minute_states"), "{sql}");
            assert!(sql.contains("3600000.0E0"), "{sql}");
            assert!(sql.contains("'user'"), "{sql}");
        }
        let spark = statement(PortableQuery::Spend, Engine::Spark, "apron", &november()).expect("sql");
        assert!(
            spark.contains("`user`") && !spark.contains("\"user\"") && spark.contains("AS STRING"),
            "{spark}"
        );
        assert!(spark.contains("TIMESTAMP '2026-11-01 00:00:00.000Z'"), "{spark}");
    }

    #[test]
    fn allocations_and_events_are_repaired_only_where_their_folder_is() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let at = tmp.path().to_str().expect("utf-8");
        let repairs = |sql: &str| sql.lines().filter(|l| l.starts_with("MSCK REPAIR TABLE")).count();
        let without = ddl(Engine::Spark, at, None, "apron").expect("ddl");
        assert!(without.contains("CREATE TABLE IF NOT EXISTS apron.alloc_minutes"), "{without}");
        assert!(!without.contains("MSCK REPAIR TABLE apron.alloc_minutes;"), "{without}");
        assert!(!without.contains("MSCK REPAIR TABLE apron.gpu_events;"), "{without}");
        assert_eq!(repairs(&without), Table::ALL.len() - 2);
        std::fs::create_dir(tmp.path().join("alloc_minutes")).expect("mkdir");
        std::fs::create_dir(tmp.path().join("gpu_events")).expect("mkdir");
        let with = ddl(Engine::Spark, at, None, "apron").expect("ddl");
        assert!(with.contains("MSCK REPAIR TABLE apron.alloc_minutes;"), "{with}");
        assert!(with.contains("MSCK REPAIR TABLE apron.gpu_events;"), "{with}");
        let bucket = ddl(Engine::Athena, "s3://b/p", None, "apron").expect("ddl");
        assert_eq!(repairs(&bucket), Table::ALL.len(), "a bucket's prefix is not checked");
    }

    #[test]
    fn a_location_must_be_a_url_or_an_absolute_path() {
        assert_eq!(url("s3://b/p/", "--location").expect("url"), "s3://b/p");
        assert_eq!(url("/data/apron", "--location").expect("path"), "file:///data/apron");
        let err = url("data", "--location").expect_err("relative").to_string();
        assert!(err.starts_with("--location \"data\": give a URL"), "{err}");
    }
}
