//! A report over a period, from what it starts from to the figures it
//! states: [`context`] (the effective config, the session, the [`period`],
//! what the data holds in it and the [`header`] lines that say so), the
//! [`figures`] computed from it (one module per report or chart series,
//! money to the cent keeping totals), a query result read into typed rows
//! ([`columns`]), rounding for print ([`rounding`]) and the series each
//! chart draws ([`charts`]).

pub mod charts;
pub mod columns;
pub mod context;
pub mod figures;
pub mod header;
pub mod period;
pub mod rounding;
