//! How apron's two binaries write the files a person asks for, by name or
//! by folder: `apron report` and `apron demo` (the page, the summary, the
//! CSVs, the charts, the demo's config), `apron chart`, `apron sql --out`,
//! `apron export-config`, and `man-pages` of both binaries: [`replace`].
//!
//! The recorder's data folder is not written here: its files, with fixed
//! temporary names a crash can be recovered from and the modes of an
//! analysts' group, are `apron_store::create`'s and `apron_store::durable`'s.
//! This crate depends on nothing of apron's and on `tempfile` alone, so the
//! lean crates (the report renderer, the command-line helpers) can use it.

pub mod replace;
