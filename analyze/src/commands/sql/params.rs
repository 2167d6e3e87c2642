//! The `--param NAME=VALUE` values of `apron sql`: how one is parsed, what
//! type its value gets, and how the set is checked against the query's
//! placeholders and bound to the planned query ([`bind_to`]).
//!
//! The value is bound to `$NAME` as a typed DataFusion [`ScalarValue`] and
//! never formatted into the SQL text. Its type is read from its form, in
//! this order: a date or time ([`crate::report::period::parse_time`]'s forms) is a
//! `Timestamp(ms, UTC)`, a whole number an `Int64`, a decimal number a
//! `Float64`, anything else `Utf8`. Planning the query is the session's job;
//! running it, `commands/sql.rs`'s.

use std::collections::{HashMap, HashSet};

use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{Expr, LogicalPlan};
use datafusion::prelude::DataFrame;

use crate::error::{Error, InputError, SessionError};
use crate::report::period;

/// One `--param NAME=VALUE`, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The placeholder's name without `$`: `1` for `$1`, `host` for `$host`.
    pub name: String,
    /// The value, typed by its form.
    pub value: ScalarValue,
}

/// Parses one `--param` argument: `NAME=VALUE`, the name with or without
/// its `$`. The value is everything after the first `=`, and may be empty
/// (an empty text). A number too large for a `Float64` (`1e309`) is
/// refused, naming it.
pub fn parse(given: &str) -> Result<Param, InputError> {
    let syntax = || InputError::ParamSyntax { given: given.to_owned() };
    let (name, value) = given.split_once('=').ok_or_else(syntax)?;
    let name = name.trim();
    let name = name.strip_prefix('$').unwrap_or(name);
    let valid_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid_name {
        return Err(syntax());
    }
    let typed = typed(value);
    // A number past a float's range (`1e309`) reads as infinity; bound,
    // it would compare above every value instead of failing.
    if let ScalarValue::Float64(Some(x)) = typed
        && !x.is_finite()
    {
        return Err(InputError::ParamOutOfRange { name: name.to_owned(), value: value.to_owned() });
    }
    Ok(Param { name: name.to_owned(), value: typed })
}

/// Parses every `--param`, refusing a name given twice.
pub fn parse_all(given: &[String]) -> Result<Vec<Param>, InputError> {
    let mut params: Vec<Param> = Vec::with_capacity(given.len());
    for text in given {
        let param = parse(text)?;
        if params.iter().any(|p| p.name == param.name) {
            return Err(InputError::ParamTwice { name: param.name });
        }
        params.push(param);
    }
    Ok(params)
}

/// The value `text` binds as: see the module docs for the rule. A number
/// past a float's range is infinite here; [`parse`] refuses it.
pub fn typed(text: &str) -> ScalarValue {
    if let Ok(ms) = period::parse_time(text) {
        return period::timestamp(ms);
    }
    if let Ok(n) = text.parse::<i64>() {
        return ScalarValue::Int64(Some(n));
    }
    // Rust also reads "inf" and "NaN" as floats; only digits, a point, an
    // exponent and signs make a number here.
    let numeric = text.chars().any(|c| c.is_ascii_digit())
        && text.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if numeric && let Ok(x) = text.parse::<f64>() {
        return ScalarValue::Float64(Some(x));
    }
    ScalarValue::Utf8(Some(text.to_owned()))
}

/// The placeholders of `plan` (`$1`, `$host`), in its subqueries too.
///
/// Collected by hand rather than by `LogicalPlan::get_parameter_types`,
/// which refuses a placeholder the planner guessed two types for (`$1` in
/// `ts >= $1 - INTERVAL '1 hour'` and in `ts < $1`); the bound value settles
/// its type.
pub fn placeholders(plan: &LogicalPlan) -> Result<HashSet<String>, DataFusionError> {
    let mut ids = HashSet::new();
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|expr| {
            expr.apply(|e| {
                if let Expr::Placeholder(p) = e {
                    ids.insert(p.id.clone());
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    Ok(ids)
}

/// Matches `params` to the query's `placeholders` (`$1`, `$host`, as the
/// plan names them) and gives the values to bind: every placeholder needs a
/// value, and every value a placeholder.
pub fn bind(params: Vec<Param>, placeholders: &HashSet<String>) -> Result<ParamValues, InputError> {
    let mut known: Vec<String> = placeholders.iter().cloned().collect();
    known.sort_by(|a, b| placeholder_order(a).cmp(&placeholder_order(b)));
    if let Some(unknown) = params.iter().find(|p| !placeholders.contains(&format!("${}", p.name))) {
        return Err(InputError::UnknownParam { name: unknown.name.clone(), known });
    }
    let given: HashSet<String> = params.iter().map(|p| format!("${}", p.name)).collect();
    let missing: Vec<String> = known.iter().filter(|k| !given.contains(*k)).cloned().collect();
    if !missing.is_empty() {
        return Err(InputError::MissingParam { missing });
    }
    let values: HashMap<String, ScalarValue> = params.into_iter().map(|p| (p.name, p.value)).collect();
    Ok(ParamValues::from(values))
}

/// `$1 < $2 < … < $10 < $a < $b`: positional placeholders by number, then
/// named ones by name.
fn placeholder_order(name: &str) -> (u8, u64, &str) {
    let bare = name.strip_prefix('$').unwrap_or(name);
    match bare.parse::<u64>() {
        Ok(n) => (0, n, ""),
        Err(_) => (1, 0, bare),
    }
}

/// `df` with its placeholders bound to the values `given`: each
/// placeholder needs one, and each one a placeholder.
pub fn bind_to(df: DataFrame, given: Vec<Param>) -> Result<DataFrame, Error> {
    let placeholders: HashSet<String> =
        placeholders(df.logical_plan()).map_err(|source| SessionError::Query { source })?;
    if placeholders.is_empty() && given.is_empty() {
        return Ok(df);
    }
    let values = bind(given, &placeholders)?;
    Ok(df.with_param_values(values).map_err(|source| SessionError::Query { source })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> HashSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn values_are_typed_by_their_form() {
        let utc = |ms: i64| ScalarValue::TimestampMillisecond(Some(ms), Some("UTC".into()));
        assert_eq!(typed("2026-11-01"), utc(1_793_491_200_000));
        assert_eq!(typed("2026-11-01T01:00:00+01:00"), utc(1_793_491_200_000));
        assert_eq!(typed("2026-11-01 00:00:01"), utc(1_793_491_201_000));
        assert_eq!(typed("42"), ScalarValue::Int64(Some(42)));
        assert_eq!(typed("-7"), ScalarValue::Int64(Some(-7)));
        assert_eq!(typed("2.5"), ScalarValue::Float64(Some(2.5)));
        assert_eq!(typed("1e3"), ScalarValue::Float64(Some(1000.0)));
        for text in ["gpu-07", "NaN", "inf", "", "team", "1.2.3"] {
            assert_eq!(typed(text), ScalarValue::Utf8(Some(text.to_owned())), "{text:?}");
        }
    }

    #[test]
    fn a_param_is_name_equals_value_with_or_without_dollar() {
        let p = parse("1=2026-11-01").expect("valid");
        assert_eq!(p.name, "1");
        let p = parse("$host=a=b").expect("valid");
        assert_eq!((p.name.as_str(), p.value), ("host", ScalarValue::Utf8(Some("a=b".into()))));
        for bad in ["2026-11-01", "=5", "$=5", "a b=5"] {
            let err = parse(bad).expect_err(bad);
            assert!(matches!(err, InputError::ParamSyntax { .. }), "{bad}: {err:?}");
            assert!(err.to_string().contains(bad), "{err}");
        }
        for (given, shown) in [("1=1e309", "--param 1=1e309"), ("$x=-2e400", "--param x=-2e400")] {
            let err = parse(given).expect_err(given);
            assert!(matches!(err, InputError::ParamOutOfRange { .. }), "{given}: {err:?}");
            assert!(err.to_string().starts_with(&format!("{shown}: ")), "{err}");
        }
        assert_eq!(parse("1=1.7e308").expect("in range").value, ScalarValue::Float64(Some(1.7e308)));
        let err = parse_all(&["1=a".into(), "$1=b".into()]).expect_err("twice");
        assert_eq!(err.to_string(), "--param 1 is given twice");
    }

    #[test]
    fn every_placeholder_needs_a_value_and_every_value_a_placeholder() {
        let params = |list: &[&str]| parse_all(&list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let query = names(&["$1", "$2", "$10"]);
        let err = bind(params(&["1=a", "3=b"]).expect("valid"), &query).expect_err("no $3");
        assert_eq!(err.to_string(), "--param 3: the query has no $3; its parameters are $1, $2, $10");
        let err = bind(params(&["2=a"]).expect("valid"), &query).expect_err("$1, $10 missing");
        assert_eq!(err.to_string(), "the query needs $1, $10: give --param 1=VALUE --param 10=VALUE");
        let err = bind(params(&["x=1"]).expect("valid"), &HashSet::new()).expect_err("none");
        assert_eq!(err.to_string(), "--param x: the query has no $x; it takes no parameters");
        let bound = bind(params(&["1=a", "2=2", "10=2026-11-01"]).expect("valid"), &query).expect("all");
        let ParamValues::Map(map) = bound else { panic!("named values") };
        assert_eq!(map.len(), 3);
        assert_eq!(map["2"].value, ScalarValue::Int64(Some(2)));
    }
}
