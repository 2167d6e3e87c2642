//! Checks that collect their failures, so a test that compares many
//! figures fails once, listing every one that differs.

use serde_json::Value;

/// Collected mismatches; [`Checks::finish`] fails the test listing all.
#[derive(Debug, Default)]
pub struct Checks {
    /// What differed, one line each.
    pub failures: Vec<String>,
}

impl Checks {
    /// Records `what()` as a failure unless `ok`.
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }

    /// Records a failure.
    pub fn fail(&mut self, what: impl Into<String>) {
        self.failures.push(what.into());
    }

    /// `got` equals `want`.
    pub fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.fail(format!("{what}: got {got:?}, want {want:?}"));
        }
    }

    /// `got` is within `tolerance` of `want`.
    pub fn near(&mut self, what: &str, got: f64, want: f64, tolerance: f64) {
        // NaN (a figure not found) fails too.
        if (got - want).abs().partial_cmp(&tolerance).is_none_or(|o| o.is_gt()) {
            self.fail(format!("{what}: got {got}, want {want} ± {tolerance}"));
        }
    }

    /// Two row lists are the same: same length, same columns, strings and
    /// booleans equal, numbers within 1e-9 (the CLI rounds; the expected
    /// figures are the rounded ones).
    pub fn rows(&mut self, what: &str, got: &[Value], want: &[Value]) {
        if got.len() != want.len() {
            self.fail(format!(
                "{what}: {} rows, want {}:\n  got  {got:?}\n  want {want:?}",
                got.len(),
                want.len()
            ));
            return;
        }
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let (Some(g), Some(w)) = (g.as_object(), w.as_object()) else {
                self.fail(format!("{what}: row {i} is not an object: {g}"));
                continue;
            };
            let mut gk: Vec<&String> = g.keys().collect();
            let mut wk: Vec<&String> = w.keys().collect();
            gk.sort();
            wk.sort();
            if gk != wk {
                self.fail(format!("{what}: row {i} has columns {gk:?}, want {wk:?}"));
                continue;
            }
            for (key, wv) in w {
                let gv = &g[key];
                let same = match (gv.as_f64(), wv.as_f64()) {
                    (Some(a), Some(b)) => (a - b).abs() <= 1e-9,
                    _ => gv == wv,
                };
                if !same {
                    let id = ["team", "user", "host", "gpu_uuid", "window", "dow"]
                        .iter()
                        .find_map(|k| w.get(*k))
                        .map(Value::to_string)
                        .unwrap_or_default();
                    self.fail(format!("{what}: row {i} ({id}) {key}: got {gv}, want {wv}"));
                }
            }
        }
    }

    /// Fails the test when anything was recorded, listing every failure.
    pub fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} figure(s) differ from the expected ones:\n- {}",
            self.failures.len(),
            self.failures.join("\n- ")
        );
    }
}
