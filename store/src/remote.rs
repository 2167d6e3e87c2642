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
//! role).
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
        let bad = |why: &str| RemoteError::BadUrl { url: url.to_owned(), why: why.to_owned() };
        let parsed = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
        if !matches!(parsed.scheme(), "s3" | "s3a") {
            return Err(bad(&format!("the scheme is {}:, not s3:", parsed.scheme())));
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(bad("no bucket"));
        }
        if parsed.query().is_some() || parsed.fragment().is_some() {
            return Err(bad("a query or fragment"));
        }
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
            .map_err(|source| RemoteError::Setup { url: url.to_owned(), source })?;
        let prefix = Path::from(parsed.path().trim_matches('/'));
        Ok(Remote { store: Arc::new(store), prefix, url: url.trim_end_matches('/').to_owned() })
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The URL as given, without a trailing `/`.
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
        let bucket_url = self.url.split('/').take(3).collect::<Vec<_>>().join("/");
        format!("{bucket_url}/{key}")
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
        let bare = Remote::from_url("s3://fleet").expect("no prefix is fine");
        assert_eq!(bare.key("a/b").as_ref(), "a/b");
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
