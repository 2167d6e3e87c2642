//! Object storage (S3 and servers that speak its protocol): where the
//! recorder ships closed days, laid out as a data folder is
//! (`PREFIX/<table>/date=…/host=…/<file>.parquet`).
//!
//! The URL names the bucket and the prefix (`s3://BUCKET/PREFIX`); how to
//! reach it comes from the standard AWS environment, never from flags:
//! `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`,
//! `AWS_REGION` (or `AWS_DEFAULT_REGION`), `AWS_ENDPOINT_URL` (a server
//! other than AWS's) and `AWS_ALLOW_HTTP=true` (a local server without TLS).
//! Without keys the AWS credential chain applies (an instance's or a pod's
//! role). Credentials written into the URL (`s3://KEY:SECRET@BUCKET`) are
//! not used, and never shown: [`Remote::url`] and every message name the
//! bucket without them ([`crate::redact`]).
//!
//! Waits are bounded: a connection is given up after 5 s, a request after
//! 60 s, and a failing request is retried 3 times within 15 s, so an
//! unreachable or refusing store is an error within seconds, not minutes.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, RetryConfig};

/// Connection attempts are given up after this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A request (a whole upload of a part or a file) after this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Retries of a failed request, all within [`RETRY_TIMEOUT`].
const MAX_RETRIES: usize = 3;
const RETRY_TIMEOUT: Duration = Duration::from_secs(15);

/// A bucket and a prefix in it.
#[derive(Debug, Clone)]
pub struct Remote {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    url: String,
}

/// Why a URL gives no object store.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The text is not an object storage URL apron knows.
    #[error("{url} is not an object storage URL apron reads ({why}); give s3://BUCKET/PREFIX")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The S3 client could not be set up from the URL and the environment.
    #[error("cannot set up the S3 client for {url} (from the AWS_* environment)")]
    Setup {
        /// The URL as given.
        url: String,
        /// The client's reason.
        #[source]
        source: object_store::Error,
    },
}

impl Remote {
    /// The bucket and prefix of `url` (`s3://BUCKET/PREFIX`, the prefix
    /// optional), reached as the AWS environment says.
    pub fn from_url(url: &str) -> Result<Remote, RemoteError> {
        let shown = crate::redact::userinfo(url).into_owned();
        let bad = |why: &str| RemoteError::BadUrl { url: shown.clone(), why: why.to_owned() };
        let mut parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(parsed.scheme(), "s3" | "s3a") {
            return Err(bad(&format!("the scheme is {}:, not s3:", parsed.scheme())));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(bad("no bucket"));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(bad("a query or fragment"));
        }
        // The S3 client reads the bucket from the host and ignores user
        // information: the URL without it is the same place.
        let url = if parsed.username().is_empty() && parsed.password().is_none() {
            url.to_owned()
        } else {
            if parsed.set_username("").is_err() || parsed.set_password(None).is_err() {
                return Err(bad("its credentials cannot be taken out"));
            }
            parsed.as_str().to_owned()
        };
        let url = url.as_str();
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: MAX_RETRIES,
            retry_timeout: RETRY_TIMEOUT,
        };
        // Set key by key, so that the client options the environment gave
        // (AWS_ALLOW_HTTP, a proxy) are kept.
        let seconds = |d: Duration| format!("{}s", d.as_secs());
        let store = AmazonS3Builder::from_env()
            .with_url(url)
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), seconds(CONNECT_TIMEOUT))
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), seconds(REQUEST_TIMEOUT))
            .with_retry(retry)
            .build()
            .map_err(|source| RemoteError::Setup { url: shown.clone(), source })?;
        let prefix = Path::from(parsed.path().trim_matches('/'));
        Ok(Remote { store: Arc::new(store), prefix, url: url.trim_end_matches('/').to_owned() })
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The URL as given, without its credentials (if it had any) nor a
    /// trailing `/`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The key of `relative` (`gpu_samples/date=…/host=…/x.parquet`, parts
    /// separated by `/`) under the prefix.
    pub fn key(&self, relative: &str) -> Path {
        relative.split('/').filter(|p| !p.is_empty()).fold(self.prefix.clone(), |key, part| key.join(part))
    }

    /// `key` as a URL, for messages.
    pub fn url_of(&self, key: &Path) -> String {
        format!("{}/{key}", self.bucket_url())
    }

    /// The bucket's URL, without the prefix: `s3://BUCKET`.
    pub fn bucket_url(&self) -> String {
        self.url.split('/').take(3).collect::<Vec<_>>().join("/")
    }

    /// The prefix, the key every relative key is under (empty for the
    /// whole bucket).
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }
}

/// An object store's error as the one-line cause of a message: for an
/// answer that was not a success, its status, where it came from, and the
/// S3 error code and message of its body (or a short piece of a body that
/// is not S3's); otherwise the client's own words and every cause under
/// them (`… error sending request: client error (Connect): tcp connect
/// error: Connection refused (os error 111)`), on one line.
pub fn describe(e: &object_store::Error) -> String {
    crate::redact::userinfo(&describe_plainly(e)).into_owned()
}

/// [`describe`], before credentials in URLs are hidden.
fn describe_plainly(e: &object_store::Error) -> String {
    let text = crate::error_chain::format_chain(e).split_whitespace().collect::<Vec<_>>().join(" ");
    const STATUS: &str = "Server returned non-2xx status code: ";
    let Some(at) = text.find(STATUS) else { return text };
    let rest = &text[at + STATUS.len()..];
    let (status, body) = rest.split_once(':').map_or((rest, ""), |(s, b)| (s, b.trim()));
    let from = text
        .rsplit_once("Error performing ")
        .and_then(|(_, r)| r.split(' ').nth(1))
        .and_then(|u| url::Url::parse(u).ok())
        .map(|u| format!(" from {}", u.origin().ascii_serialization()))
        .unwrap_or_default();
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = body.find(&open)? + open.len();
        let end = body[start..].find(&format!("</{name}>"))? + start;
        Some(body[start..end].to_owned())
    };
    match (tag("Code"), tag("Message")) {
        (Some(code), Some(message)) => format!("{status}{from}: {code} ({message})"),
        (Some(code), None) => format!("{status}{from}: {code}"),
        _ if body.trim().is_empty() => format!("{status}{from}, not an S3 answer"),
        _ => {
            let piece: String = body.chars().take(120).collect();
            format!("{status}{from}, not an S3 answer: {piece}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_bucket_and_prefix() {
        let remote = Remote::from_url("s3://fleet/apron/prod/").expect("a good URL");
        assert_eq!(remote.url(), "s3://fleet/apron/prod");
        let key = remote.key("gpu_samples/date=2026-10-01/host=n1/x.parquet");
        assert_eq!(key.as_ref(), "apron/prod/gpu_samples/date=2026-10-01/host=n1/x.parquet");
        assert_eq!(
            remote.url_of(&key),
            "s3://fleet/apron/prod/gpu_samples/date=2026-10-01/host=n1/x.parquet"
        );
        assert_eq!(remote.bucket_url(), "s3://fleet");
        assert_eq!(remote.prefix().as_ref(), "apron/prod");
        let bare = Remote::from_url("s3://fleet").expect("no prefix is fine");
        assert_eq!(bare.key("a/b").as_ref(), "a/b");
    }

    #[test]
    fn store_errors_read_as_status_origin_and_s3_code() {
        let source = |body: &str| -> Box<dyn std::error::Error + Send + Sync> {
            format!(
                "Error performing list request: Error performing GET http://127.0.0.1:9000/b?list-type=2 in 1ms - Server returned non-2xx status code: {body}"
            )
            .into()
        };
        let generic = |body: &str| object_store::Error::Generic { store: "S3", source: source(body) };
        let xml = "403 Forbidden: <?xml version=\"1.0\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>The signature does not match.</Message></Error>";
        assert_eq!(
            describe(&generic(xml)),
            "403 Forbidden from http://127.0.0.1:9000: SignatureDoesNotMatch (The signature does not match.)"
        );
        assert_eq!(
            describe(&generic("404 Not Found: {\"error\":\"no volume\"}")),
            "404 Not Found from http://127.0.0.1:9000, not an S3 answer: {\"error\":\"no volume\"}"
        );
        assert_eq!(
            describe(&generic("404 Not Found: ")),
            "404 Not Found from http://127.0.0.1:9000, not an S3 answer"
        );
        let other =
            object_store::Error::Generic { store: "S3", source: "error sending request\nfor url".into() };
        assert_eq!(describe(&other), "Generic S3 error: error sending request for url");
        // The causes under the client's words, each once.
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let sending = std::io::Error::other(Sending(refused));
        let chained = object_store::Error::Generic { store: "S3", source: Box::new(sending) };
        assert_eq!(describe(&chained), "Generic S3 error: error sending request: Connection refused");
    }

    #[derive(Debug)]
    struct Sending(std::io::Error);

    impl std::fmt::Display for Sending {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("error sending request")
        }
    }

    impl std::error::Error for Sending {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn credentials_in_the_url_are_left_out_of_it() {
        let remote = Remote::from_url("s3://AKIA1:s3cr3t@fleet/apron/prod").expect("a good URL");
        assert_eq!(remote.url(), "s3://fleet/apron/prod");
        assert_eq!(remote.bucket_url(), "s3://fleet");
        assert_eq!(remote.prefix().as_ref(), "apron/prod");
        // A secret typed with its `/` is no URL; the error hides it all the same.
        let error = Remote::from_url("s3://AKIA1:ab/cd@fleet/x").expect_err("a bad port").to_string();
        assert!(error.starts_with("s3://***@fleet/x is not an object storage URL"), "{error}");
        assert!(!error.contains("AKIA1") && !error.contains("ab/cd"), "{error}");
    }

    #[test]
    fn other_urls_are_refused_by_name() {
        for (url, why) in [
            ("/srv/data", "relative URL"),
            ("https://fleet/x", "the scheme is https:"),
            ("s3:///x", "no bucket"),
            ("s3://fleet/x?versionId=1", "a query"),
        ] {
            let error = Remote::from_url(url).expect_err(url).to_string();
            assert!(error.starts_with(&format!("{url} is not an object storage URL")), "{error}");
            assert!(error.contains(why), "{url}: {error}");
            assert!(error.contains("s3://BUCKET/PREFIX"), "{error}");
        }
    }
}
