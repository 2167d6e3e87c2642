//! gRPC peers for tests/it/kubernetes.rs: a Python with grpcio and
//! grpcio-tools, which compiles a `.proto` file with gRPC's own compiler
//! and serves it.
//!
//! The Python is `$APRON_TEST_GRPC_PYTHON`, else the virtual environment
//! `<target>/tools/grpc-venv`, created there on first use with
//! `python3 -m venv` and `pip install grpcio grpcio-tools` (`.ci/run`
//! creates it beforehand).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The grpcio packages the tests run.
pub const GRPCIO: [&str; 2] = ["grpcio>=1.60,<2", "grpcio-tools>=1.60,<2"];

/// A Python that imports grpc and grpc_tools, installed on first use when
/// there is none.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("APRON_TEST_GRPC_PYTHON") {
                return PathBuf::from(path);
            }
            let venv = super::tools_dir().join("grpc-venv");
            let python = venv.join("bin").join("python");
            let imports = |python: &PathBuf| {
                Command::new(python).args(["-c", "import grpc, grpc_tools"]).status().is_ok_and(|s| s.success())
            };
            if !imports(&python) {
                let made = Command::new("python3").arg("-m").arg("venv").arg(&venv).status();
                assert!(made.is_ok_and(|s| s.success()), "python3 -m venv {} failed", venv.display());
                let installed = Command::new(&python)
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check"])
                    .args(GRPCIO)
                    .status();
                assert!(
                    installed.is_ok_and(|s| s.success()) && imports(&python),
                    "the Kubernetes test needs grpcio: pip install {GRPCIO:?} into {}, or set APRON_TEST_GRPC_PYTHON",
                    venv.display()
                );
            }
            python
        })
        .clone()
}
