//! `apron sql --show [NAME]`: the SQL of a named report as this binary
//! embeds it ([`crate::session::queries`]), so a report's SQL can be read, changed
//! and run (`apron sql --show pick | apron sql -f - --param …`) without a
//! source checkout; without a name, the names and what each answers.

use std::io::Write;

use crate::error::{Error, InputError, OutputError};
use crate::session::queries;

/// Prints the query `name` (empty: the list of names) to `out`. A name no
/// query has is an [`InputError::UnknownQuery`] naming them all.
pub(super) fn run<W: Write>(name: &str, mut out: W) -> Result<(), Error> {
    let text = if name.is_empty() {
        list()
    } else {
        queries::named(name)
            .ok_or_else(|| InputError::UnknownQuery {
                name: name.to_owned(),
                known: queries::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
            })?
            .to_owned()
    };
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| Error::from(OutputError::Write { source }))
}

/// One line per query, by name: its name, padded, and what it answers.
fn list() -> String {
    let mut all = queries::ALL.to_vec();
    all.sort_unstable_by_key(|(name, _)| *name);
    let width = all.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    all.iter().map(|(name, text)| format!("{name:width$}  {}\n", queries::summary(text))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_every_query_once() {
        let text = list();
        assert_eq!(text.lines().count(), queries::ALL.len());
        assert!(
            text.lines().any(|l| l.starts_with("pick ") && l.ends_with("for CUDA_VISIBLE_DEVICES.")),
            "{text}"
        );
    }
}
