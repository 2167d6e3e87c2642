//! How a team key reads to a person. The data, the commands' CSV and JSON
//! and the report's CSV files keep the key `(unallocated)` (GPU time no
//! process held: the attribution of docs/src/definitions.md); a manager reading the page, the
//! summary, a chart or the report's headline sees it in words,
//! [`NO_ONE`], and every other team as it is named.

/// The key of GPU time no process or allocation held.
pub const UNALLOCATED: &str = "(unallocated)";

/// [`UNALLOCATED`] as a reader sees it.
pub const NO_ONE: &str = "no one (GPU empty)";

/// `team` as a reader sees it: [`NO_ONE`] for [`UNALLOCATED`], any other
/// team as it is.
pub fn team_label(team: &str) -> &str {
    if team == UNALLOCATED { NO_ONE } else { team }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_empty_gpu_key_is_put_in_words() {
        assert_eq!(team_label("(unallocated)"), "no one (GPU empty)");
        assert_eq!(team_label("nlp"), "nlp");
        assert_eq!(team_label("unassigned"), "unassigned");
    }
}
