//! Pod labels from the Kubernetes API server, optional: team rules can
//! then match a label (`team=nlp`) where a namespace says too little.
//!
//! The node's own sources ([`super`]) name a pod but carry none of its
//! labels, so these come from the API server: one `GET` of the pod, read
//! with the in-cluster service account (its CA as the only trusted root,
//! never the system's; its bearer token, re-read as the kubelet rotates
//! it). The answer's `metadata.uid` and `metadata.labels` are all that is
//! read of it ([`ApiServer::pod`]).
//!
//! Only the labels whose keys the operator listed are kept
//! ([`parse_label_keys`], [`render_labels`]), the allowlist of
//! kube-state-metrics' `--metric-labels-allowlist`: the recorded text stays
//! small and a label nobody asked for (an owner's e-mail, a ticket) is
//! never copied. A key or value that Kubernetes itself would refuse is
//! left out rather than recorded, so the rendered `k=v,k=v` text always
//! reads back unambiguously.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use reqwest::{StatusCode, Url};

/// Where the in-cluster service account's files are.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The deadline of each pod lookup.
pub const LABELS_DEADLINE: Duration = Duration::from_secs(2);
/// How often the token file is read again: projected service-account
/// tokens rotate (the kubelet renews them at 80% of their life, about
/// hourly), and a 401 makes it read again at once.
const TOKEN_REREAD: Duration = Duration::from_secs(60);
/// The most of an answer that is read.
const MAX_BODY: usize = 1 << 20;
/// The most of a Kubernetes `Status` message an error quotes, in characters.
const MAX_MESSAGE: usize = 200;

/// A lookup on the API server failed, or the client cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    /// An environment variable of in-cluster pods is not set.
    #[error("{var} is not set: not running in a Kubernetes pod (or the pod has no service environment)")]
    MissingEnv {
        /// `KUBERNETES_SERVICE_HOST` or `KUBERNETES_SERVICE_PORT`.
        var: &'static str,
    },
    /// The API server's address is not an `https` URL.
    #[error("{url:?} is not an https URL of the Kubernetes API server")]
    BadUrl {
        /// The address given.
        url: String,
    },
    /// The service account's CA certificate cannot be read.
    #[error("cannot read the service account's CA certificate {path}")]
    ReadCa {
        /// `ca.crt`.
        path: PathBuf,
        /// The read's error.
        #[source]
        source: std::io::Error,
    },
    /// The service account's CA certificate is not PEM certificates.
    #[error("the service account's CA certificate {path} {why}")]
    BadCa {
        /// `ca.crt`.
        path: PathBuf,
        /// What is wrong with it.
        why: &'static str,
        /// The parser's error, if it gave one.
        #[source]
        source: Option<reqwest::Error>,
    },
    /// The service account's token cannot be read.
    #[error("cannot read the service account's token {path}")]
    ReadToken {
        /// `token`.
        path: PathBuf,
        /// The read's error.
        #[source]
        source: std::io::Error,
    },
    /// The service account's token cannot be a bearer token.
    #[error("the service account's token {path} {why}")]
    BadToken {
        /// `token`.
        path: PathBuf,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The HTTP client cannot be built (with these roots).
    #[error("cannot set up the HTTPS client of the API server with the CA certificate {path}")]
    Client {
        /// `ca.crt`.
        path: PathBuf,
        /// reqwest's error.
        #[source]
        source: reqwest::Error,
    },
    /// A namespace or pod name that cannot be a segment of an API path.
    #[error("{namespace:?}/{name:?} cannot name a pod in an API server path")]
    BadName {
        /// The namespace asked for.
        namespace: String,
        /// The pod's name asked for.
        name: String,
    },
    /// The API server answered with an error status.
    #[error("the API server answered {status} for pod {namespace}/{name}{detail}")]
    Status {
        /// The status (`403 Forbidden`).
        status: StatusCode,
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// `": "` and the start of the Kubernetes `Status`' message, or
        /// nothing when the answer is not a `Status`.
        detail: String,
    },
    /// No answer came within the deadline.
    #[error("the API server did not answer for pod {namespace}/{name} within {deadline:?}")]
    Timeout {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The deadline.
        deadline: Duration,
    },
    /// No connection (TCP or TLS), or the answer broke off.
    #[error("cannot get pod {namespace}/{name} from the API server at {base}")]
    Request {
        /// The API server's address.
        base: String,
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// reqwest's error (its causes say whether TCP or TLS failed).
        #[source]
        source: reqwest::Error,
    },
    /// The answer is larger than anything a pod's JSON can be.
    #[error("the API server's answer for pod {namespace}/{name} is over {limit} bytes")]
    TooLarge {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The limit.
        limit: usize,
    },
    /// The answer is not a pod's JSON.
    #[error("the API server's answer for pod {namespace}/{name} is not a pod's JSON")]
    Json {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
}

impl ApiServerError {
    /// The HTTP status the API server answered, if it answered one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ApiServerError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A pod's uid and labels, as the API server has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodMeta {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.labels`, all of them (see [`render_labels`]).
    pub labels: BTreeMap<String, String>,
}

/// The bearer token last read, and when.
#[derive(Debug)]
struct Token {
    /// `Bearer <token>`, marked sensitive (never printed by `Debug`).
    header: HeaderValue,
    read_at: Instant,
    /// A 401 answered it and the file still held it: read it again at the
    /// next lookup, however recent.
    stale: bool,
}

/// A client of the Kubernetes API server, reading pods with a service
/// account. Cheap to clone; clones share the connection pool and token.
#[derive(Debug, Clone)]
pub struct ApiServer {
    client: reqwest::Client,
    base: Url,
    token_path: PathBuf,
    token: Arc<Mutex<Token>>,
    token_reread: Duration,
    deadline: Duration,
}

impl ApiServer {
    /// In-cluster: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`
    /// (an IPv6 host in brackets), the CA `<dir>/ca.crt` as the only trusted
    /// root (no system roots), the bearer token `<dir>/token`; each lookup
    /// under `deadline`.
    pub fn in_cluster(service_account_dir: &Path, deadline: Duration) -> Result<ApiServer, ApiServerError> {
        let host = std::env::var("KUBERNETES_SERVICE_HOST").ok();
        let port = std::env::var("KUBERNETES_SERVICE_PORT").ok();
        let base = in_cluster_url(host.as_deref(), port.as_deref())?;
        ApiServer::new(&base, service_account_dir, deadline)
    }

    /// The API server at `base_url` (`https` only), with the service
    /// account's files in `service_account_dir` as [`ApiServer::in_cluster`]
    /// uses them. The CA and the token are read now: a missing or bad one
    /// is an error here, not at the first lookup.
    pub fn new(
        base_url: &str,
        service_account_dir: &Path,
        deadline: Duration,
    ) -> Result<ApiServer, ApiServerError> {
        let base = Url::parse(base_url)
            .ok()
            .filter(|u| u.scheme() == "https" && u.has_host() && !u.cannot_be_a_base())
            .ok_or_else(|| ApiServerError::BadUrl { url: base_url.to_owned() })?;
        let ca_path = service_account_dir.join("ca.crt");
        let pem = std::fs::read(&ca_path)
            .map_err(|source| ApiServerError::ReadCa { path: ca_path.clone(), source })?;
        // A bundle: the API server's CA may be several certificates while
        // it rotates. (`Certificate::from_pem` would take any bytes and
        // trust nothing, silently.)
        let roots = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| ApiServerError::BadCa {
            path: ca_path.clone(),
            why: "is not PEM certificates",
            source: Some(source),
        })?;
        if roots.is_empty() {
            return Err(ApiServerError::BadCa {
                path: ca_path,
                why: "holds no PEM certificate",
                source: None,
            });
        }
        let mut builder = reqwest::Client::builder()
            // Its CA alone: no system roots (the API server's certificate
            // is signed by the cluster's CA, and no other CA may vouch for
            // a server that is sent the token).
            .tls_built_in_root_certs(false)
            .https_only(true)
            // The token goes to the API server itself, never to a proxy
            // that `HTTPS_PROXY` (for shipping, say) names; nor anywhere a
            // redirect points.
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(deadline)
            .timeout(deadline)
            .user_agent(concat!("apron-recorder/", env!("CARGO_PKG_VERSION")));
        for root in roots {
            builder = builder.add_root_certificate(root);
        }
        let client = builder.build().map_err(|source| ApiServerError::Client { path: ca_path, source })?;
        let token_path = service_account_dir.join("token");
        let header = read_token(&token_path)?;
        Ok(ApiServer {
            client,
            base,
            token_path,
            token: Arc::new(Mutex::new(Token { header, read_at: Instant::now(), stale: false })),
            token_reread: TOKEN_REREAD,
            deadline,
        })
    }

    /// `GET {base}/api/v1/namespaces/{namespace}/pods/{name}` (each segment
    /// percent-encoded) with `Authorization: Bearer <token>` and `Accept:
    /// application/json`: the pod's `metadata.uid` and all its labels
    /// (filtering them is [`render_labels`]' job). The token file is read
    /// again when last read a minute ago or more, and at once after a 401:
    /// if it then holds another token, the lookup is made again with it.
    /// The whole lookup, the second try included, is under the deadline.
    pub async fn pod(&self, namespace: &str, name: &str) -> Result<PodMeta, ApiServerError> {
        let url = pod_url(&self.base, namespace, name)?;
        let lookup = async {
            let sent = self.token(false)?;
            match self.get(&url, &sent, namespace, name).await {
                Err(e) if e.status() == Some(StatusCode::UNAUTHORIZED) => {
                    let fresh = self.token(true)?;
                    if fresh != sent {
                        return self.get(&url, &fresh, namespace, name).await;
                    }
                    // Refused, and the file still holds it: read it again
                    // at the next lookup too (the kubelet may be about to
                    // write the new one).
                    self.lock_token().stale = true;
                    Err(e)
                }
                result => result,
            }
        };
        match tokio::time::timeout(self.deadline, lookup).await {
            Ok(result) => result,
            Err(_) => Err(self.timeout(namespace, name)),
        }
    }

    /// The bearer token's header: the one last read, or the file's now
    /// when `force`, when a 401 made it stale, or when last read
    /// [`TOKEN_REREAD`] ago or more.
    fn token(&self, force: bool) -> Result<HeaderValue, ApiServerError> {
        let mut token = self.lock_token();
        if force || token.stale || token.read_at.elapsed() >= self.token_reread {
            token.header = read_token(&self.token_path)?;
            token.read_at = Instant::now();
            token.stale = false;
        }
        Ok(token.header.clone())
    }

    fn lock_token(&self) -> std::sync::MutexGuard<'_, Token> {
        // The lock guards no invariant a panic could break halfway.
        self.token.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One `GET` of a pod with `token`.
    async fn get(
        &self,
        url: &Url,
        token: &HeaderValue,
        namespace: &str,
        name: &str,
    ) -> Result<PodMeta, ApiServerError> {
        let request_error = |source: reqwest::Error| {
            if source.is_timeout() {
                self.timeout(namespace, name)
            } else {
                ApiServerError::Request {
                    base: self.base.as_str().trim_end_matches('/').to_owned(),
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                    source,
                }
            }
        };
        let response = self
            .client
            .get(url.clone())
            .header(AUTHORIZATION, token.clone())
            .header(ACCEPT, "application/json")
            .send()
            .await
            .map_err(request_error)?;
        let status = response.status();
        let (body, whole) = read_capped(response, MAX_BODY).await.map_err(request_error)?;
        if !status.is_success() {
            return Err(ApiServerError::Status {
                status,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                detail: if whole { status_detail(&body) } else { String::new() },
            });
        }
        if !whole {
            return Err(ApiServerError::TooLarge {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                limit: MAX_BODY,
            });
        }
        let pod: Pod = serde_json::from_slice(&body).map_err(|source| ApiServerError::Json {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        })?;
        Ok(PodMeta { uid: pod.metadata.uid, labels: pod.metadata.labels.unwrap_or_default() })
    }

    fn timeout(&self, namespace: &str, name: &str) -> ApiServerError {
        ApiServerError::Timeout {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            deadline: self.deadline,
        }
    }
}

/// The API server's URL from the in-cluster environment: client-go's rule
/// (both set and not empty; `net.JoinHostPort`, brackets for IPv6).
fn in_cluster_url(host: Option<&str>, port: Option<&str>) -> Result<String, ApiServerError> {
    let host = host
        .filter(|h| !h.is_empty())
        .ok_or(ApiServerError::MissingEnv { var: "KUBERNETES_SERVICE_HOST" })?;
    let port = port
        .filter(|p| !p.is_empty())
        .ok_or(ApiServerError::MissingEnv { var: "KUBERNETES_SERVICE_PORT" })?;
    Ok(if host.contains(':') { format!("https://[{host}]:{port}") } else { format!("https://{host}:{port}") })
}

/// `{base}/api/v1/namespaces/{namespace}/pods/{name}`, each segment
/// percent-encoded. A name Kubernetes refuses in a path (empty, `.`, `..`,
/// holding `/` or `%`) is refused here too.
fn pod_url(base: &Url, namespace: &str, name: &str) -> Result<Url, ApiServerError> {
    let bad_segment = |s: &str| s.is_empty() || s == "." || s == ".." || s.contains(['/', '%']);
    let bad_name = || ApiServerError::BadName { namespace: namespace.to_owned(), name: name.to_owned() };
    if bad_segment(namespace) || bad_segment(name) {
        return Err(bad_name());
    }
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.path_segments_mut().map_err(|()| bad_name())?.pop_if_empty().extend([
        "api",
        "v1",
        "namespaces",
        namespace,
        "pods",
        name,
    ]);
    // Any version, from the API server's own cache (no read of etcd):
    // labels a few seconds old are as good, and a fleet's recorders asking
    // every few minutes cost the cluster nothing.
    url.set_query(Some("resourceVersion=0"));
    Ok(url)
}

/// Reads `response`'s body, at most `limit` bytes of it: the bytes, and
/// whether they are the whole body.
async fn read_capped(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    if response.content_length().is_some_and(|n| n > limit as u64) {
        return Ok((Vec::new(), false));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > limit {
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}

/// `": "` and the start of a Kubernetes `Status`' message on one line, or
/// nothing when `body` is not a `Status` with a message.
fn status_detail(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Status {
        kind: Option<String>,
        message: Option<String>,
    }
    let Ok(Status { kind: Some(kind), message: Some(message) }) = serde_json::from_slice::<Status>(body)
    else {
        return String::new();
    };
    if kind != "Status" || message.is_empty() {
        return String::new();
    }
    let mut detail = String::from(": ");
    detail.extend(message.chars().take(MAX_MESSAGE).map(|c| if c.is_control() { ' ' } else { c }));
    if message.chars().nth(MAX_MESSAGE).is_some() {
        detail.push('…');
    }
    detail
}

/// Reads the bearer token at `path` into an `Authorization` header value.
fn read_token(path: &Path) -> Result<HeaderValue, ApiServerError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ApiServerError::ReadToken { path: path.to_owned(), source })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(ApiServerError::BadToken { path: path.to_owned(), why: "is empty" });
    }
    let mut header =
        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| ApiServerError::BadToken {
            path: path.to_owned(),
            why: "holds characters an HTTP header cannot carry",
        })?;
    header.set_sensitive(true);
    Ok(header)
}

/// The part of a pod's JSON that is read.
#[derive(serde::Deserialize)]
struct Pod {
    metadata: Metadata,
}

/// The part of a pod's `metadata` that is read.
#[derive(serde::Deserialize)]
struct Metadata {
    uid: String,
    /// Absent when the pod has none.
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// The labels kept: those whose key is in `keys`, as `k=v` pairs sorted by
/// key, joined by `,` (Kubernetes label keys and values hold neither `,`
/// nor `=`, so the text is unambiguous); `None` when none is kept. A pair
/// whose key is not a valid Kubernetes label key (an optional DNS-1123
/// subdomain prefix of at most 253 characters and `/`, then a name of at
/// most 63 characters of `[A-Za-z0-9._-]` beginning and ending with a
/// letter or digit) or whose value is not a valid label value (empty, or
/// like such a name) is left out.
pub fn render_labels(labels: &BTreeMap<String, String>, keys: &[String]) -> Option<String> {
    apron_schemas::k8s_labels::render(labels, keys)
}

/// Parses and checks the operator's `--k8s-labels` list: label keys
/// separated by commas (spaces around each are ignored), each a valid
/// Kubernetes label key (as [`render_labels`] checks them); a key listed
/// twice is kept once. The error is one line naming the bad key.
pub fn parse_label_keys(list: &str) -> Result<Vec<String>, String> {
    let mut keys: Vec<String> = Vec::new();
    for key in list.split(',').map(str::trim) {
        if key.is_empty() {
            return Err(format!("{list:?} lists an empty label key (keys are separated by commas)"));
        }
        if !valid_label_key(key) {
            return Err(format!(
                "{key:?} is not a Kubernetes label key: an optional DNS subdomain prefix (at most 253 \
                 characters of a-z, 0-9, '-' and '.') and '/', then a name of at most 63 characters of \
                 A-Z, a-z, 0-9, '-', '_' and '.', beginning and ending with a letter or digit"
            ));
        }
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_owned());
        }
    }
    Ok(keys)
}

/// Whether `key` is a valid label key, by Kubernetes' rule
/// (`IsQualifiedName`).
fn valid_label_key(key: &str) -> bool {
    apron_schemas::k8s_labels::valid_key(key)
}

#[cfg(test)]
mod tests;
