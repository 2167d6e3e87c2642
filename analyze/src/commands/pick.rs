//! `apron pick [--host H] [--window 5m]`: the least-loaded GPU of a host
//! (this machine's without `--host`, by the name the recorder records it
//! under), so `CUDA_VISIBLE_DEVICES=$(apron pick)` works. The ranking is
//! `queries/pick.sql`; this module binds its parameters, and turns "no
//! recent samples" into an error rather than a guess, naming the host's
//! newest sample (`queries/newest_sample.sql`).

pub mod this_host;

use std::io::Write;
use std::sync::Arc;

use chrono::Utc;
use clap::Args;
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;

use crate::cli::flag_groups::GlobalArgs;
use crate::error::{Error, OutputError, SessionError};
use crate::output::Format;
use crate::session::Session;
use crate::session::queries;

/// `apron pick [--host H] [--window 5m]`.
#[derive(Debug, Clone, Args)]
pub struct PickArgs {
    /// The host whose GPUs to rank. Default: this machine, by the name
    /// apron-recorder records it under without --host (its host name).
    #[arg(long)]
    pub host: Option<String>,

    /// How far back to average utilization (e.g. 30s, 5m, 1h).
    #[arg(long, default_value = "5m", value_parser = apron_cli::units::positive_minutes)]
    pub window: std::time::Duration,
}

/// Ranks the GPUs of `args.host` (else this machine's) and prints the best
/// one's index, or a MIG instance's UUID (or, with `--format csv|json`, the
/// whole ranking).
pub async fn run<W: Write>(global: &GlobalArgs, args: &PickArgs, mut out: W) -> Result<(), Error> {
    let host = match &args.host {
        Some(host) => Host { name: host.clone(), this_machine: false },
        None => Host {
            name: crate::commands::pick::this_host::host_name().map_err(SessionError::ThisHost)?,
            this_machine: true,
        },
    };
    let session = Session::open(&global.data, global.memory_limit()).await?;
    let window_ms = i64::try_from(args.window.as_millis()).unwrap_or(i64::MAX);
    let since = Utc::now().timestamp_millis().saturating_sub(window_ms);
    let params = vec![
        ScalarValue::Utf8(Some(host.name.clone())),
        ScalarValue::TimestampMillisecond(Some(since), Some(Arc::from("UTC"))),
    ];
    let df = session.sql_with_params(queries::PICK, params).await?;
    let (schema, batches) = session.collect(df).await?;
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    if rows == 0 {
        return Err(no_recent_data(&session, global, args, &host).await);
    }
    if global.format != Format::Table {
        return crate::output::write_batches(global.format, schema, &batches, out).map(drop);
    }
    let first = batches.iter().find(|b| b.num_rows() > 0).expect("rows > 0");
    // The index, or a MIG instance's UUID: what CUDA_VISIBLE_DEVICES takes.
    let device = first.column_by_name("device").and_then(|c| cast(c, &DataType::Utf8).ok()).and_then(|c| {
        let c = c.as_string_opt::<i32>()?;
        c.is_valid(0).then(|| c.value(0).to_owned())
    });
    let Some(device) = device else {
        return Err(no_recent_data(&session, global, args, &host).await);
    };
    writeln!(out, "{device}")
        .and_then(|()| out.flush())
        .map_err(|source| Error::from(OutputError::Write { source }))
}

/// The host whose GPUs are ranked.
#[derive(Debug)]
struct Host {
    /// Its name, as in the `host=` folders.
    name: String,
    /// Whether it is this machine, taken for want of `--host`.
    this_machine: bool,
}

/// The error for a host without samples in the window, naming its newest
/// sample when it has older ones. This machine without any samples is
/// likely not a host the data is about: the error says to name one.
async fn no_recent_data(session: &Session, global: &GlobalArgs, args: &PickArgs, host: &Host) -> Error {
    let newest = async {
        let df = session
            .sql_with_params(queries::NEWEST_SAMPLE, vec![ScalarValue::Utf8(Some(host.name.clone()))])
            .await
            .ok()?;
        let (_, batches) = session.collect(df).await.ok()?;
        // VARCHAR may come back as Utf8View; read it as plain Utf8.
        let col = cast(batches.first()?.column(0), &DataType::Utf8).ok()?;
        let col = col.as_string_opt::<i32>()?.clone();
        col.is_valid(0).then(|| format!(", newest sample at {}", col.value(0)))
    }
    .await
    .unwrap_or_default();
    if newest.is_empty() && host.this_machine {
        return SessionError::NoDataForThisHost { host: host.name.clone(), data: global.data.clone() }.into();
    }
    SessionError::NoRecentData {
        host: host.name.clone(),
        window: humantime::format_duration(args.window).to_string(),
        data: global.data.clone(),
        newest,
    }
    .into()
}
