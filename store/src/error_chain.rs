//! How an error and its causes read on one log line: what the recorder's
//! tick loop, its maintenance and crash recovery log when they carry on
//! past a failure.

/// An error and its causes on one line, each cause after `": "`; a cause
/// whose words the line already holds (many errors repeat their cause in
/// their own message) is not said twice; the credentials of any URL in
/// them are hidden ([`crate::redact`]).
pub fn format_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let text = c.to_string();
        if !text.is_empty() && !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
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

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        let sending = std::io::Error::other(Wrap("error sending request".into(), refused));
        let retried = Wrap("PUT failed after 3 retries - HTTP error: error sending request".into(), sending);
        assert_eq!(
            format_chain(&retried),
            "PUT failed after 3 retries - HTTP error: error sending request: connection refused"
        );
    }

    #[derive(Debug)]
    struct Wrap(String, std::io::Error);

    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.1)
        }
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
