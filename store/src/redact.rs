//! Credentials written into a URL (`http://user:password@host/`,
//! `s3://KEY:SECRET@bucket/`) are never shown: every URL apron or the
//! recorder prints, logs or writes into a report, and every error message,
//! passes through [`userinfo`] first. What is used to connect is not this
//! module's business: callers keep the URL as given for that.

use std::borrow::Cow;

/// What stands in for the credentials.
pub const HIDDEN: &str = "***";

/// `text` with the user information of every URL in it (what comes before
/// `@` in `scheme://user:password@host/…`) replaced by [`HIDDEN`]:
/// `http://***@prom:9090/`. A URL is recognised by `scheme://`, anywhere in
/// the text (a message may quote one), and ends at white space or a quote.
/// Its user information ends at the last `@` before the first `/`, `?` or
/// `#`; or, when there is none, at the first `@` after it if what comes
/// before that `/` is `user:something` with a `something` that is not a
/// port: a secret key typed into the URL as it is, `/` and all
/// (`s3://KEY:abc/def@bucket/prefix`, a URL the parser refuses, so an error
/// message quotes it). Text without such a URL is returned as it was.
pub fn userinfo(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    // Up to where `text` is copied into `out`.
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let authority_start = from + found + 3;
        from = authority_start;
        if !follows_a_scheme(&text[..from - 3]) {
            continue;
        }
        let Some(end) = userinfo_end(&text[authority_start..]) else { continue };
        out.push_str(&text[copied..authority_start]);
        out.push_str(HIDDEN);
        copied = authority_start + end;
        from = copied;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Where the user information of the URL whose authority starts `rest`
/// ends (the index of its `@`); `None` when it has none.
fn userinfo_end(rest: &str) -> Option<usize> {
    let url_end = rest
        .find(|c: char| matches!(c, '"' | '\'' | '`' | '<' | '>') || c.is_whitespace())
        .unwrap_or(rest.len());
    let url = &rest[..url_end];
    let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    if let Some(at) = url[..authority_end].rfind('@') {
        return Some(at);
    }
    let (_, after_colon) = url[..authority_end].split_once(':')?;
    let a_port = after_colon.bytes().all(|b| b.is_ascii_digit());
    if a_port {
        return None;
    }
    url[authority_end..].find('@').map(|at| authority_end + at)
}

/// Whether `before` ends in a URL scheme: letters, digits, `+`, `-` or
/// `.`, with a letter among them (the scheme starts at the first).
fn follows_a_scheme(before: &str) -> bool {
    before
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        .any(|c| c.is_ascii_alphabetic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_hidden_wherever_a_url_is() {
        for (text, shown) in [
            ("http://user:pass@prom:9090", "http://***@prom:9090"),
            ("http://user:pass@prom:9090/api/v1/query_range", "http://***@prom:9090/api/v1/query_range"),
            ("s3://AKIA123:s3cr3t/x+y@fleet/apron/prod", "s3://***@fleet/apron/prod"),
            ("s3://AKIA123:s3/cr/3t@fleet/apron", "s3://***@fleet/apron"),
            (
                "cannot parse s3://K:ab/c@b/p: invalid port number",
                "cannot parse s3://***@b/p: invalid port number",
            ),
            ("s3://AKIA123:s3cr3t@fleet", "s3://***@fleet"),
            ("https://token@host/x?a=b@c", "https://***@host/x?a=b@c"),
            ("http://a:p@ss@host/", "http://***@host/"),
            ("http://u:p@[::1]:9000/b", "http://***@[::1]:9000/b"),
            (
                "cannot query http://u:p@h/api (error sending request for url (http://u:p@h/api)); see s3://K:S@b/p.",
                "cannot query http://***@h/api (error sending request for url (http://***@h/api)); see s3://***@b/p.",
            ),
            ("\"http://u:p@h\" and 'https://v:q@i'", "\"http://***@h\" and 'https://***@i'"),
        ] {
            assert_eq!(userinfo(text), shown, "{text}");
        }
    }

    #[test]
    fn text_without_credentials_is_kept_as_it_is() {
        for text in [
            "",
            "s3://fleet/apron/prod",
            "http://127.0.0.1:9090/api?x=a@b",
            "http://host/path/user@example.com",
            "http://host:9090/path/user@example.com",
            "mailto:someone@example.com",
            "/srv/data/user@host",
            "://user:pass@host",
            "a 9://u:p@h b",
            "cannot read /data: No such file or directory",
        ] {
            assert!(matches!(userinfo(text), Cow::Borrowed(t) if t == text), "{text}");
        }
    }
}
