//! The book's table of definitions (`docs/src/definitions.md`) says where
//! each definition lives in the code: every `path.rs::name` it cites must
//! name a file of the repository that defines or holds `name`, so the
//! table cannot drift from the code it points to.

use std::path::Path;

/// The `path.rs::name` references of `text`: (path, last name).
fn references(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for quoted in text.split('`').skip(1).step_by(2) {
        let Some((path, names)) = quoted.split_once(".rs::") else { continue };
        let path = format!("{path}.rs");
        // `a.rs::f` is the table's own example of the notation.
        if path.contains('/') {
            let name = names.rsplit("::").next().unwrap_or(names).to_owned();
            out.push((path, name));
        }
    }
    out
}

/// Whether `code` has `name` as a whole word.
fn has_word(code: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    code.match_indices(name).any(|(i, _)| {
        let before = code[..i].chars().next_back().is_none_or(|c| !word(c));
        let after = code[i + name.len()..].chars().next().is_none_or(|c| !word(c));
        before && after
    })
}

#[test]
fn every_place_the_table_of_definitions_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let table = std::fs::read_to_string(root.join("docs/src/definitions.md")).expect("read definitions.md");
    let refs = references(&table);
    assert!(refs.len() >= 20, "the table cites the code: {refs:?}");
    let mut missing = Vec::new();
    for (path, name) in &refs {
        match std::fs::read_to_string(root.join(path)) {
            Ok(code) if has_word(&code, name) => {}
            Ok(_) => missing.push(format!("{path} has no {name}")),
            Err(e) => missing.push(format!("{path}: {e}")),
        }
    }
    assert!(missing.is_empty(), "docs/src/definitions.md names what is not there: {missing:#?}");
}

#[test]
fn a_reference_is_a_path_and_its_last_name() {
    let refs = references("see `store/src/rollup.rs::gpu_minutes` and `a.rs::f`, not `x`");
    assert_eq!(refs, [("store/src/rollup.rs".to_owned(), "gpu_minutes".to_owned())]);
    assert!(has_word("fn gpu_minutes(", "gpu_minutes") && !has_word("fn gpu_minutes_x(", "gpu_minutes"));
}
