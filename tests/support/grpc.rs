//! gRPC peers for tests/it/kubernetes.rs: a Python with grpcio and
//! grpcio-tools, which compiles a `.proto` file with gRPC's own compiler
//! and serves it.
//!
//! The Python is `$APRON_TEST_GRPC_PYTHON`, else the virtual environment
//! `<target>/tools/grpc-venv`, created there on first use with
//! `python3 -m venv` and `pip install grpcio grpcio-tools` (`.ci/run`
//! creates it beforehand).

use std::path::PathBuf;
use std::sync::OnceLock;

/// The grpcio packages the tests run.
pub const GRPCIO: [&str; 2] = ["grpcio>=1.60,<2", "grpcio-tools>=1.60,<2"];

/// A Python that imports grpc and grpc_tools, installed on first use when
/// there is none.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            super::venv_python(
                "grpc-venv",
                "APRON_TEST_GRPC_PYTHON",
                &GRPCIO,
                |python| super::python_runs(python, "import grpc, grpc_tools"),
                "the Kubernetes test needs grpcio",
            )
        })
        .clone()
}
