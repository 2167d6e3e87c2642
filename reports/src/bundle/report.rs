//! What one report says, in reading order: the [`Report`] the caller fills
//! in, its headline [`Figure`]s and its [`Section`]s. The renderers beside
//! it (`html.rs`, `markdown.rs`) read it; it imports none of them.

use super::table::TableData;
use crate::chart::ChartName;

/// Everything one report says, in reading order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// The page title, e.g. `"GPU fleet report: November 2026"`.
    pub title: String,
    /// The period covered, as the reader should see it.
    pub period: String,
    /// The data folder the figures came from, as the user gave it.
    pub data: String,
    /// Which configuration file was used (teams, prices).
    pub config: String,
    /// ISO 4217 code of the money amounts, e.g. `"USD"`.
    pub currency: String,
    /// The big numbers at the top, in order.
    pub headline: Vec<Figure>,
    /// The body, in order.
    pub sections: Vec<Section>,
}

/// One headline number.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Figure {
    /// What it is, e.g. `"Idle cost"`.
    pub label: String,
    /// The number as it should read, e.g. `"$12,400.00"` (see [`crate::money`]).
    pub value: String,
    /// How it moved, e.g. `"+12% vs October"`; `None` shows nothing.
    pub change: Option<String>,
}

/// One part of the report: a heading, prose, and optionally a chart and a
/// table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Section {
    /// The section heading.
    pub heading: String,
    /// Paragraphs of plain text (no markup; it is escaped).
    pub paragraphs: Vec<String>,
    /// A table, also written as `<name>.csv`.
    pub table: Option<TableData>,
    /// A chart shown after the paragraphs, as `<chart>.png` in the folder.
    pub chart: Option<ChartName>,
}
