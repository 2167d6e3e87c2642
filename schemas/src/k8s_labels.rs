//! `k8s_labels`: the pod labels the recorder keeps, as one text column of
//! `proc_samples`, `proc_minutes` and `alloc_minutes`.
//!
//! The text is `key=value` pairs sorted by key and joined by `,`
//! (`team=nlp,tier=prod`). Kubernetes label keys and values contain
//! neither `,` nor `=` ([`valid_key`], [`valid_value`]), so the text is
//! unambiguous and every engine can match it with a regular expression
//! ([`selector_regex`]) as apron's own Rust does ([`matches`]).

use std::collections::BTreeMap;

/// Whether `name` is a label name: at most 63 characters of `[A-Za-z0-9._-]`,
/// beginning and ending with a letter or digit.
fn valid_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// Whether `prefix` is a DNS subdomain (a label key's optional prefix): at
/// most 253 characters, dot-separated parts of lowercase letters, digits
/// and `-`, each beginning and ending with a letter or digit.
fn valid_prefix(prefix: &str) -> bool {
    prefix.len() <= 253
        && prefix.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        })
}

/// Whether `key` is a Kubernetes label key: `[prefix/]name`.
pub fn valid_key(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => valid_prefix(prefix) && valid_name(name),
        None => valid_name(key),
    }
}

/// Whether `value` is a Kubernetes label value: empty, or a valid name.
pub fn valid_value(value: &str) -> bool {
    value.is_empty() || valid_name(value)
}

/// The text of `labels` whose key is in `keys`: sorted `key=value` pairs
/// joined by `,`; `None` when none is there. A pair that is not a valid
/// label is left out (a source that broke the rules is not copied).
pub fn render(labels: &BTreeMap<String, String>, keys: &[String]) -> Option<String> {
    let text = labels
        .iter()
        .filter(|(k, v)| keys.iter().any(|x| x == *k) && valid_key(k) && valid_value(v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    (!text.is_empty()).then_some(text)
}

/// The pairs of a `k8s_labels` text.
pub fn pairs(text: &str) -> impl Iterator<Item = (&str, &str)> {
    text.split(',').filter_map(|pair| pair.split_once('='))
}

/// Whether a `k8s_labels` text has every pair of `selector` (all must
/// match, as a Kubernetes `matchLabels`). An empty selector matches
/// nothing: a rule that names no label claims no pod.
pub fn matches(text: &str, selector: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| pairs(text).any(|(tk, tv)| tk == k && tv == v))
}

/// A regular expression that matches a `k8s_labels` text exactly when
/// [`matches`] does, in Rust's, Java's (Spark) and Trino's dialects: the
/// selector's pairs in key order (the text's order), each a whole pair,
/// anything between them. Keys and values are escaped (`.` is their only
/// character a regular expression reads specially).
pub fn selector_regex(selector: &BTreeMap<String, String>) -> String {
    let escape = |s: &str| s.replace('.', "\\.");
    let body = selector.iter().map(|(k, v)| format!("{}={}", escape(k), escape(v))).collect::<Vec<_>>();
    format!("(^|,){}(,|$)", body.join(",(.*,)?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn keys_and_values_follow_kubernetes_rules() {
        for ok in ["team", "app.kubernetes.io/name", "a", "x_y-z.1", "example.com/cost-center"] {
            assert!(valid_key(ok), "{ok}");
        }
        for bad in
            ["", "-team", "team-", "a/b/c", "Example.com/x", "/x", "x/", "a b", "a,b", "a=b", &"k".repeat(64)]
        {
            assert!(!valid_key(bad), "{bad}");
        }
        assert!(valid_value("") && valid_value("nlp") && valid_value("v1.2_3-x"));
        assert!(
            !valid_value("a,b") && !valid_value("a=b") && !valid_value("-a") && !valid_value(&"v".repeat(64))
        );
    }

    #[test]
    fn only_the_keys_asked_for_are_kept_sorted() {
        let labels = map(&[("tier", "prod"), ("team", "nlp"), ("secret-ish", "x"), ("bad", "a b")]);
        let keys = ["team".to_owned(), "tier".to_owned(), "bad".to_owned(), "absent".to_owned()];
        assert_eq!(render(&labels, &keys).as_deref(), Some("team=nlp,tier=prod"));
        assert_eq!(render(&labels, &["absent".to_owned()]), None);
    }

    #[test]
    fn a_selector_matches_when_every_pair_is_there_in_rust_and_as_a_regex() {
        let text = "app.kubernetes.io/name=bert,team=nlp,tier=prod";
        let cases = [
            (map(&[("team", "nlp")]), true),
            (map(&[("team", "nlp"), ("tier", "prod")]), true),
            (map(&[("app.kubernetes.io/name", "bert"), ("tier", "prod")]), true),
            (map(&[("team", "nl")]), false),
            (map(&[("team", "nlp"), ("tier", "dev")]), false),
            (map(&[("eam", "nlp")]), false),
            (map(&[("app.kubernetes.io/name", "bertx")]), false),
            (map(&[]), false),
        ];
        for (selector, want) in cases {
            assert_eq!(matches(text, &selector), want, "{selector:?}");
            if !selector.is_empty() {
                let re = regex::Regex::new(&selector_regex(&selector)).expect("a regular expression");
                assert_eq!(re.is_match(text), want, "{re}");
            }
        }
        assert_eq!(
            selector_regex(&map(&[("a.b/c", "x.y"), ("team", "nlp")])),
            "(^|,)a\\.b/c=x\\.y,(.*,)?team=nlp(,|$)"
        );
    }
}
