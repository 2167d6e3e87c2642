//! One line of the Prometheus text exposition format, as exporters serve
//! it on `/metrics` and people save it (`curl :9400/metrics >> file`):
//! `name{label="value",…} value [timestamp]`, `# HELP`/`# TYPE` and other
//! comments, blank lines.
//!
//! Written here rather than taken from a crate: the crates at hand split
//! labels on every `,` and `=` (a value holding either breaks), keep the
//! space some hand-written samples put after a comma in the label's name,
//! and skip a line they cannot read without a word. This reader follows
//! the format's grammar (escapes `\\`, `\"` and `\n` in label values;
//! values in Go's float syntax, `NaN` and `±Inf` included; an optional
//! integer timestamp in ms), tolerates spaces around labels, and refuses
//! anything else with what is wrong.

/// A sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric's name.
    pub name: String,
    /// Its labels, in the line's order.
    pub labels: Vec<(String, String)>,
    /// The value as written.
    pub raw: String,
    /// The value.
    pub value: f64,
    /// The sample's own time (ms since the epoch), when the line gives one.
    pub timestamp_ms: Option<i64>,
}

impl Sample {
    /// The value of label `name`, when set and not empty.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
    }
}

/// What a line is.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A sample.
    Sample(Sample),
    /// `# HELP name …`: a new scrape starts where a metric is documented
    /// twice.
    Help(String),
    /// Another comment, `# TYPE` included, or a blank line.
    Other,
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Reads one line; an error says what is wrong with it.
pub fn parse(line: &str) -> Result<Line, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(Line::Other);
    }
    if let Some(comment) = line.strip_prefix('#') {
        let mut words = comment.split_whitespace();
        if words.next() == Some("HELP")
            && let Some(name) = words.next()
        {
            return Ok(Line::Help(name.to_owned()));
        }
        return Ok(Line::Other);
    }
    let end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
    let name = &line[..end];
    if !name.starts_with(is_name_start) {
        return Err(format!("{line:?} does not start with a metric name"));
    }
    let mut rest = line[end..].trim_start();
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = read_labels(after, &mut labels)?;
    }
    let mut parts = rest.split_whitespace();
    let Some(raw) = parts.next() else {
        return Err(format!("{name}: no value"));
    };
    let value = parse_value(raw).ok_or_else(|| format!("{name}: {raw:?} is not a number"))?;
    let timestamp_ms = match parts.next() {
        Some(t) => Some(t.parse::<i64>().map_err(|_| format!("{name}: {t:?} is not a timestamp in ms"))?),
        None => None,
    };
    if let Some(extra) = parts.next() {
        return Err(format!("{name}: {extra:?} after the value and timestamp"));
    }
    Ok(Line::Sample(Sample { name: name.to_owned(), labels, raw: raw.to_owned(), value, timestamp_ms }))
}

/// Reads `label="value",…}` into `labels`; returns what follows the `}`.
fn read_labels<'a>(mut s: &'a str, labels: &mut Vec<(String, String)>) -> Result<&'a str, String> {
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let end = s.find(|c: char| !is_name_char(c)).unwrap_or(s.len());
        let key = &s[..end];
        if key.is_empty() || !key.starts_with(is_name_start) {
            return Err(format!("a label name is expected at {:?}", clip(s)));
        }
        s = s[end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or_else(|| format!("label {key}: no '=' before {:?}", clip(s)))?
            .trim_start();
        s = s.strip_prefix('"').ok_or_else(|| format!("label {key}: its value is not quoted"))?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let close = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("label {key}: its value does not end")),
                },
                Some((_, c)) => value.push(c),
                None => return Err(format!("label {key}: its value does not end")),
            }
        };
        labels.push((key.to_owned(), value));
        s = s[close + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err(format!("label {key}: ',' or '}}' expected before {:?}", clip(s)));
        }
    }
}

fn clip(s: &str) -> &str {
    let mut end = s.len().min(24);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A value in Go's float syntax (`7.824041e+06`, `NaN`, `+Inf`).
fn parse_value(raw: &str) -> Option<f64> {
    match raw {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => raw.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(line: &str) -> Sample {
        match parse(line) {
            Ok(Line::Sample(s)) => s,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn samples_with_and_without_labels_and_timestamps() {
        let s = sample(r#"dcgm_gpu_temp{gpu="0",uuid="GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323"} 34"#);
        assert_eq!((s.name.as_str(), s.value, s.timestamp_ms), ("dcgm_gpu_temp", 34.0, None));
        assert_eq!(s.label("uuid"), Some("GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323"));
        // The README's hand-written space after a comma.
        let s = sample(r#"DCGM_FI_DEV_SM_CLOCK{gpu="0", UUID="GPU-604a"} 139"#);
        assert_eq!(s.label("UUID"), Some("GPU-604a"));
        let s = sample(r#"m{a="x,y=\"z\"\\",b=""} 7.824041e+06 1395066363000"#);
        assert_eq!(s.label("a"), Some(r#"x,y="z"\"#));
        assert_eq!(s.label("b"), None, "empty is unset");
        assert_eq!((s.value, s.timestamp_ms), (7_824_041.0, Some(1_395_066_363_000)));
        assert!(sample("up NaN").value.is_nan());
        assert_eq!(
            parse("# HELP dcgm_gpu_temp GPU temperature (in C)."),
            Ok(Line::Help("dcgm_gpu_temp".into()))
        );
        assert_eq!(parse("# TYPE dcgm_gpu_temp gauge"), Ok(Line::Other));
        assert_eq!(parse("   "), Ok(Line::Other));
    }

    #[test]
    fn a_broken_line_says_what_is_wrong() {
        for (line, want) in [
            (r#"m{gpu="0" 5"#, "',' or '}' expected"),
            (r#"m{gpu=0} 5"#, "not quoted"),
            (r#"m{gpu="0} 5"#, "does not end"),
            ("m{} abc", "\"abc\" is not a number"),
            ("m 5 soon", "not a timestamp"),
            ("9m 5", "does not start with a metric name"),
            ("m", "no value"),
        ] {
            let error = parse(line).expect_err(line);
            assert!(error.contains(want), "{line}: {error}");
        }
    }
}
