//! Slurm host lists (`node[01-04,07],gpu-a1`): whether one node is in one.
//! Slurm writes every node list it prints in this compressed form
//! (`NodeList=`, the per-node `Nodes=` groups of `scontrol -d`); this
//! module only answers membership, so a list is never expanded whole.

/// Whether `node` is one of the hosts of `list`, a Slurm host list:
/// comma-separated items, each a name with bracketed ranges
/// (`node[01-04,07]`, `rack[1-2]-n[1-8]`), zero-padded ranges matching
/// only names of their width. A malformed list contains nothing.
pub fn contains(list: &str, node: &str) -> bool {
    split_top(list).into_iter().any(|item| matches(item, node))
}

/// `list` split at the commas outside brackets.
fn split_top(list: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0u32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items.into_iter().filter(|s| !s.is_empty()).collect()
}

/// Whether the one item `pattern` (literal text and `[ranges]`) names `node`.
fn matches(pattern: &str, node: &str) -> bool {
    let Some(open) = pattern.find('[') else { return pattern == node };
    let Some(close) = pattern[open..].find(']').map(|c| open + c) else { return false };
    let (prefix, ranges, rest) = (&pattern[..open], &pattern[open + 1..close], &pattern[close + 1..]);
    let Some(tail) = node.strip_prefix(prefix) else { return false };
    // The digits the range stands for, then the rest matched recursively.
    let digits = tail.len() - tail.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    (1..=digits).any(|take| {
        let (number, after) = tail.split_at(take);
        in_ranges(ranges, number) && matches(rest, after)
    })
}

/// Whether the digits `number` are in `ranges` (`01-04,07`). A bound with
/// a leading zero is zero-padded to its width, and names only numbers
/// written at that width, as Slurm writes them.
fn in_ranges(ranges: &str, number: &str) -> bool {
    let Ok(value) = number.parse::<u64>() else { return false };
    ranges.split(',').any(|range| {
        let (low, high) = range.split_once('-').unwrap_or((range, range));
        let (Ok(lo), Ok(hi)) = (low.parse::<u64>(), high.parse::<u64>()) else { return false };
        let width = if low.len() > 1 && low.starts_with('0') { low.len() } else { 0 };
        (lo..=hi).contains(&value) && format!("{value:0width$}") == number
    })
}

#[cfg(test)]
mod tests {
    use super::contains;

    #[test]
    fn plain_names_and_ranges() {
        assert!(contains("node07", "node07"));
        assert!(!contains("node07", "node7"));
        assert!(contains("node[01-04,07],gpu-a1", "node03"));
        assert!(contains("node[01-04,07],gpu-a1", "node07"));
        assert!(contains("node[01-04,07],gpu-a1", "gpu-a1"));
        assert!(!contains("node[01-04,07],gpu-a1", "node05"));
        // Zero padding is part of the name.
        assert!(!contains("node[01-04]", "node3"));
        assert!(!contains("node[1-4]", "node03"));
        assert!(contains("node[8-12]", "node10"));
        assert!(!contains("node[8-12]", "node1"));
    }

    #[test]
    fn several_ranges_and_suffixes() {
        assert!(contains("rack[1-2]-n[1-8]", "rack2-n8"));
        assert!(!contains("rack[1-2]-n[1-8]", "rack3-n1"));
        assert!(contains("n[1-3]x", "n2x"));
        assert!(!contains("n[1-3]x", "n2"));
        assert!(contains("a[1-2],b[10-11]", "b11"));
    }

    #[test]
    fn malformed_lists_contain_nothing() {
        for list in ["", "node[1-", "node[x-y]", "[", ","] {
            assert!(!contains(list, "node1"), "{list}");
        }
    }
}
