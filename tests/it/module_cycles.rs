//! No module imports another that imports it back, in any crate of the
//! workspace: dependencies between modules point one way, as they do
//! between crates.
//!
//! The test reads every crate's `src/**/*.rs` (comments and string literals
//! left out), maps each file to its module (`foo.rs` and `foo/mod.rs` are
//! `foo`, `foo/bar.rs` is `foo::bar`) and each reference to a module of the
//! same crate to an edge:
//!
//! - `crate::a::b::Item`, `super::Item` (chains of `super::` included),
//!   `self::child::Item` and a bare `child::Item` naming a submodule the
//!   file declares, in `use` lines (grouped `{…}` ones too) and in code;
//! - a reference goes to the deepest module its path names; an item a
//!   module re-exports (`pub use table::Table` in `lib.rs`, then
//!   `crate::Table`) goes to the module that defines it.
//!
//! The rule, and what is not an edge:
//!
//! - Declaring a submodule (`mod child;`) is not an edge. So a child may use
//!   its parent's items through `super::` (and `foo/tests.rs` may use
//!   `foo`'s) as long as the parent only declares the child; a parent that
//!   also calls into the child, while the child calls back, is a cycle like
//!   any other.
//! - The crate root (`lib.rs`) is the crate's front door: it declares and
//!   re-exports modules, so its own references are not edges (references
//!   *to* items defined in the root are).
//! - A binary's `main.rs` uses the library by its crate name, from outside;
//!   it is skipped.
//! - `super::` inside an inline `mod tests { … }` names the file's own
//!   module, so it is no edge; other references inside it count for the
//!   file.
//!
//! Every strongly connected group of two or more modules fails the test,
//! naming one cycle in it and the file and line of each reference. There is
//! no allow-list: a cycle is taken apart where it is made.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One module's reference to another: where it is written.
#[derive(Debug, Clone)]
struct Edge {
    file: PathBuf,
    line: usize,
}

/// The modules of one crate and the references between them.
#[derive(Debug, Default)]
struct Graph {
    /// Module path ("" for the root) → its file.
    modules: BTreeMap<String, PathBuf>,
    /// (from, to) → the first reference found.
    edges: BTreeMap<(String, String), Edge>,
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is in the workspace");
    let crates = crate_dirs(workspace);
    assert!(crates.len() >= 5, "found the workspace's crates: {crates:?}");
    let mut failures = Vec::new();
    for dir in &crates {
        let name = dir.strip_prefix(workspace).expect("under the workspace").display().to_string();
        let graph = read_crate(&dir.join("src"));
        for group in strongly_connected(&graph) {
            failures.push(format!("{name}: {}", describe_cycle(&graph, &group, workspace)));
        }
    }
    assert!(failures.is_empty(), "modules that import each other:\n{}", failures.join("\n"));
}

/// The checker itself finds a cycle, a `super::` one and a root re-export
/// one, and lets a child use the parent that only declares it.
#[test]
fn the_checker_finds_cycles_and_allows_a_declaring_parent() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path();
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(p, text).expect("write");
    };
    write("lib.rs", "pub mod a;\npub mod b;\npub mod p;\npub use a::Thing;\npub const ROOT: u8 = 1;\n");
    write("a.rs", "//! uses crate::b::X only in a comment\nuse crate::ROOT;\npub struct Thing;\n");
    write("b.rs", "pub fn f() -> u8 { let s = \"crate::a::Thing\"; crate::ROOT + s.len() as u8 }\n");
    write("p.rs", "pub mod c;\npub fn helper() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n");
    write("p/c.rs", "use super::helper;\npub fn g() { helper() }\n");
    let graph = read_crate(src);
    assert!(strongly_connected(&graph).is_empty(), "{:?}", graph.edges.keys().collect::<Vec<_>>());
    assert!(graph.edges.contains_key(&("p::c".into(), "p".into())));
    assert!(graph.edges.contains_key(&("a".into(), "".into())));

    // The parent now calls into its child, which calls back: a cycle.
    write("p.rs", "pub mod c;\npub fn helper() {}\npub fn run() { c::g() }\n");
    // `crate::Thing` is `a`'s, re-exported by the root: b → a → b.
    write("a.rs", "use crate::b::f;\npub struct Thing;\n");
    write("b.rs", "use crate::{Thing, ROOT};\npub fn f() {}\n");
    let graph = read_crate(src);
    let groups = strongly_connected(&graph);
    assert_eq!(
        groups,
        vec![vec!["a".to_string(), "b".to_string()], vec!["p".to_string(), "p::c".to_string()]]
    );
    let text = describe_cycle(&graph, &groups[1], src);
    assert!(text.contains("p → p::c → p") || text.contains("p::c → p → p::c"), "{text}");
    assert!(text.contains("p.rs:3"), "{text}");
}

/// Every crate folder of the workspace: a `Cargo.toml` beside a `src/`.
fn crate_dirs(workspace: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![workspace.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if !p.is_dir() || name.starts_with('.') || name == "target" || name == "src" {
                continue;
            }
            if p.join("Cargo.toml").is_file() && p.join("src").is_dir() {
                out.push(p.clone());
            }
            stack.push(p);
        }
    }
    out.sort();
    out
}

/// Reads one crate's `src/` into its module graph.
fn read_crate(src: &Path) -> Graph {
    let mut files = Vec::new();
    collect_rs(src, &mut files);
    let has_lib = src.join("lib.rs").is_file();
    let mut graph = Graph::default();
    let mut texts = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).expect("under src").to_path_buf();
        if has_lib && rel == Path::new("main.rs") {
            continue;
        }
        let module = module_of(&rel);
        let text = fs::read_to_string(&file).expect("a source file reads as UTF-8");
        graph.modules.insert(module.clone(), file.clone());
        texts.push((module, file, strip_comments_and_strings(&text)));
    }
    // What each module re-exports (`pub use child::Item`): (module, name) →
    // the module its path names.
    let mut reexports: BTreeMap<(String, String), String> = BTreeMap::new();
    for (module, _, text) in &texts {
        let children = children_of(&graph.modules, module);
        for r in references(text) {
            if r.is_pub_use
                && let Some(abs) = absolute(module, &r, &children)
                && let Some(name) = abs.last()
            {
                let target = deepest_module(&graph.modules, &abs);
                if target != *module {
                    reexports.insert((module.clone(), name.clone()), target);
                }
            }
        }
    }
    for (module, file, text) in &texts {
        if module.is_empty() {
            continue;
        }
        let children = children_of(&graph.modules, module);
        for r in references(text) {
            let Some(abs) = absolute(module, &r, &children) else { continue };
            let mut target = deepest_module(&graph.modules, &abs);
            // An item a module re-exports is the defining module's (followed
            // through a few re-exports of re-exports).
            let depth = if target.is_empty() { 0 } else { target.split("::").count() };
            if let Some(name) = abs.get(depth) {
                for _ in 0..4 {
                    let Some(re) = reexports.get(&(target.clone(), name.clone())) else { break };
                    target = re.clone();
                }
            }
            if target != *module {
                graph
                    .edges
                    .entry((module.clone(), target))
                    .or_insert_with(|| Edge { file: file.clone(), line: r.line });
            }
        }
    }
    graph
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        fs::read_dir(dir).expect("read src").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            collect_rs(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// `lib.rs` → "", `a/mod.rs` and `a.rs` → "a", `a/b.rs` → "a::b".
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

/// The names of `parent`'s direct submodules.
fn children_of(modules: &BTreeMap<String, PathBuf>, parent: &str) -> BTreeSet<String> {
    modules.keys().filter_map(|m| child_name(parent, m)).collect()
}

/// `m`'s name when it is a direct child of `parent`.
fn child_name(parent: &str, m: &str) -> Option<String> {
    let rest = if parent.is_empty() { m } else { m.strip_prefix(parent)?.strip_prefix("::")? };
    (!rest.is_empty() && !rest.contains("::")).then(|| rest.to_string())
}

/// The deepest known module that `segments` (from the crate root) names.
fn deepest_module(modules: &BTreeMap<String, PathBuf>, segments: &[String]) -> String {
    let mut best = String::new();
    for n in 1..=segments.len() {
        let candidate = segments[..n].join("::");
        if modules.contains_key(&candidate) {
            best = candidate;
        } else {
            break;
        }
    }
    best
}

/// A path written in a file: how it starts, its identifiers, its line.
#[derive(Debug)]
struct Reference {
    /// "crate", "super" (once per `super::`), "self", or a bare first name.
    anchor: Vec<String>,
    segments: Vec<String>,
    line: usize,
    is_pub_use: bool,
    /// Inside an inline `mod … { }` (where `super` is the file's module).
    inline_depth: usize,
}

/// `r` as a path from the crate root, or `None` when it names nothing of
/// this crate (`std::…`, a local variable's method, an external crate).
fn absolute(module: &str, r: &Reference, children: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut base: Vec<String> =
        if module.is_empty() { Vec::new() } else { module.split("::").map(str::to_string).collect() };
    match r.anchor.first().map(String::as_str) {
        Some("crate") => base.clear(),
        Some("super") => {
            // The first `super`s of an inline module only step out of it.
            let ups = r.anchor.len().saturating_sub(r.inline_depth);
            if r.anchor.len() <= r.inline_depth {
                return Some(base);
            }
            for _ in 0..ups {
                base.pop()?;
            }
        }
        Some("self") => {}
        Some(first) if r.inline_depth == 0 && children.contains(first) => base.push(first.to_string()),
        _ => return None,
    }
    base.extend(r.segments.iter().cloned());
    Some(base)
}

/// Every path in `text` that starts with `crate::`, `super::`, `self::` or
/// a bare `name::`, grouped `use` lists expanded.
fn references(text: &str) -> Vec<Reference> {
    let tokens = tokenize(text);
    let mut out = Vec::new();
    // Brace depths at which inline modules opened.
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < tokens.len() {
        let (tok, line) = (&tokens[i].0, tokens[i].1);
        match tok.as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline_mods.last() == Some(&depth) {
                    inline_mods.pop();
                }
            }
            "mod" if tokens.get(i + 2).is_some_and(|t| t.0 == "{") => inline_mods.push(depth),
            _ => {}
        }
        let starts_path = is_ident(tok)
            && tokens.get(i + 1).is_some_and(|t| t.0 == "::")
            && (i == 0 || tokens[i - 1].0 != "::");
        if !starts_path {
            i += 1;
            continue;
        }
        let is_pub_use = i >= 2 && tokens[i - 1].0 == "use" && tokens[i - 2].0 == "pub";
        let mut anchor = Vec::new();
        let mut j = i;
        while j < tokens.len() && tokens[j].0 == "super" && tokens.get(j + 1).is_some_and(|t| t.0 == "::") {
            anchor.push("super".to_string());
            j += 2;
        }
        if anchor.is_empty() {
            anchor.push(tok.clone());
            j = i + 2;
        }
        let mut prefix = Vec::new();
        let end = expand(&tokens, j, &mut prefix, &mut |segments| {
            out.push(Reference {
                anchor: anchor.clone(),
                segments,
                line,
                is_pub_use,
                inline_depth: inline_mods.len(),
            })
        });
        i = end.max(i + 1);
    }
    out
}

/// Reads a path's rest from `tokens[j]` (after a `::`), expanding `{a, b::c}`
/// groups; calls `emit` with each full path. Returns the index after it.
fn expand(
    tokens: &[(String, usize)],
    mut j: usize,
    prefix: &mut Vec<String>,
    emit: &mut dyn FnMut(Vec<String>),
) -> usize {
    let depth_at_start = prefix.len();
    loop {
        match tokens.get(j).map(|t| t.0.as_str()) {
            Some("{") => {
                j += 1;
                loop {
                    match tokens.get(j).map(|t| t.0.as_str()) {
                        Some("}") => {
                            j += 1;
                            break;
                        }
                        Some(",") => j += 1,
                        // `Name as Alias`: the alias names nothing new.
                        Some("as") => j += 2,
                        None => break,
                        Some(_) => {
                            let mut inner = prefix.clone();
                            j = expand(tokens, j, &mut inner, emit);
                        }
                    }
                }
                prefix.truncate(depth_at_start);
                return j;
            }
            Some("self") => {
                j += 1;
                emit(prefix.clone());
                return j;
            }
            Some(t) if is_ident(t) => {
                prefix.push(t.to_string());
                j += 1;
                if tokens.get(j).is_some_and(|t| t.0 == "::") {
                    j += 1;
                    continue;
                }
                emit(prefix.clone());
                return j;
            }
            // `*`, or the path ends.
            _ => {
                emit(prefix.clone());
                return j;
            }
        }
    }
}

fn is_ident(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

/// Identifiers, `::`, and single punctuation characters, with their lines.
fn tokenize(text: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((chars[start..i].iter().collect(), line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(("::".to_string(), line));
            i += 2;
        } else {
            out.push((c.to_string(), line));
            i += 1;
        }
    }
    out
}

/// `text` without comments and with every string and character literal
/// emptied, newlines kept (so line numbers hold).
fn strip_comments_and_strings(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut nest = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    nest += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c[i] == 'r'
            && (c.get(i + 1) == Some(&'"') || c.get(i + 1) == Some(&'#'))
            && (i == 0 || !(c[i - 1].is_alphanumeric() || c[i - 1] == '_'))
        {
            // A raw string: r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while c.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if c.get(j) != Some(&'"') {
                out.push(c[i]);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match c.get(j) {
                    None => break,
                    Some('"') if (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    Some('\n') => {
                        out.push('\n');
                        j += 1;
                    }
                    Some(_) => j += 1,
                }
            }
            out.push_str("\"\"");
            i = j;
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                if c.get(i) == Some(&'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' {
            // A character literal ('x', '\n', '\u{1F600}'), or a lifetime.
            let close = if c.get(i + 1) == Some(&'\\') {
                (i + 2..c.len().min(i + 12)).find(|&j| c[j] == '\'')
            } else {
                (c.get(i + 2) == Some(&'\'')).then_some(i + 2)
            };
            match close {
                Some(j) => {
                    out.push_str("' '");
                    i = j + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// The strongly connected groups of two or more modules, each sorted, in
/// order (Tarjan's algorithm).
fn strongly_connected(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: Vec<&String> = graph.modules.keys().collect();
    let index_of: BTreeMap<&String, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut adj = vec![Vec::new(); nodes.len()];
    for (from, to) in graph.edges.keys() {
        if let (Some(&f), Some(&t)) = (index_of.get(from), index_of.get(to)) {
            adj[f].push(t);
        }
    }
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        groups: Vec<Vec<usize>>,
    }
    fn visit(v: usize, adj: &[Vec<usize>], s: &mut State) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in &adj[v] {
            match s.index[w] {
                None => {
                    visit(w, adj, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            s.groups.push(group);
        }
    }
    let n = nodes.len();
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        groups: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, &adj, &mut s);
        }
    }
    let mut groups: Vec<Vec<String>> = s
        .groups
        .into_iter()
        .filter(|g| g.len() > 1)
        .map(|g| {
            let mut names: Vec<String> = g.into_iter().map(|i| nodes[i].clone()).collect();
            names.sort();
            names
        })
        .collect();
    groups.sort();
    groups
}

/// One cycle through the group's first module, each step with the file and
/// line of its reference, then the group's other members.
fn describe_cycle(graph: &Graph, group: &[String], root: &Path) -> String {
    let members: BTreeSet<&String> = group.iter().collect();
    let start = &group[0];
    // Breadth-first from `start` back to it, inside the group.
    let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    let mut closing = None;
    'search: while let Some(m) = queue.pop_front() {
        for (from, to) in graph.edges.keys() {
            if from != m || !members.contains(to) {
                continue;
            }
            if to == start {
                closing = Some(m);
                break 'search;
            }
            if !came_from.contains_key(to) {
                came_from.insert(to, m);
                queue.push_back(to);
            }
        }
    }
    let mut path = vec![start.clone()];
    if let Some(mut m) = closing {
        let mut back = vec![m];
        while m != start {
            m = came_from[m];
            back.push(m);
        }
        back.reverse();
        path = back.into_iter().cloned().collect();
        path.push(start.clone());
    }
    let steps: Vec<String> = path
        .windows(2)
        .map(|w| {
            let e = &graph.edges[&(w[0].clone(), w[1].clone())];
            let file = e.file.strip_prefix(root).unwrap_or(&e.file);
            format!("{} → {} ({}:{})", w[0], w[1], file.display(), e.line)
        })
        .collect();
    format!("{} [in the group: {}]", path.join(" → "), group.join(", ")) + "\n    " + &steps.join("\n    ")
}
