//! How an error and its causes read on one log line: what the recorder's
//! tick loop, its maintenance and crash recovery log when they carry on
//! past a failure.

/// An error and its causes on one line, each cause after `": "`, with
/// the credentials of any URL in them hidden ([`crate::redact`]).
pub fn format_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    crate::redact::userinfo(&s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cause_follows_on_the_same_line() {
        let inner = std::io::Error::other("disk full");
        let outer = std::io::Error::other(OuterError(inner));
        assert_eq!(format_chain(&outer), "cannot write x.parquet: disk full");
    }

    #[derive(Debug)]
    struct OuterError(std::io::Error);

    impl std::fmt::Display for OuterError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("cannot write x.parquet")
        }
    }

    impl std::error::Error for OuterError {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }
}
