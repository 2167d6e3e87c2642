//! Apache Spark for tests/it/portable.rs: a Python with pyspark 4, run in local
//! mode (no cluster, no network but 127.0.0.1; Java 17 from the machine).
//!
//! The Python is `$APRON_TEST_PYSPARK_PYTHON`, else the virtual
//! environment `<target>/tools/spark-venv`, created there on first use with
//! `python3 -m venv` and `pip install 'pyspark>=4,<5'` (`.ci/run` creates
//! it beforehand).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The pyspark versions the tests run.
pub const PYSPARK: &str = "pyspark>=4,<5";

/// A Python that imports pyspark 4, installed on first use when there is none.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("APRON_TEST_PYSPARK_PYTHON") {
                return PathBuf::from(path);
            }
            let venv = super::tools_dir().join("spark-venv");
            let python = venv.join("bin").join("python");
            let imports = |python: &PathBuf| {
                Command::new(python)
                    .args(["-c", "import pyspark, sys; sys.exit(0 if pyspark.__version__.startswith('4.') else 1)"])
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if !imports(&python) {
                let made = Command::new("python3").arg("-m").arg("venv").arg(&venv).status();
                assert!(made.is_ok_and(|s| s.success()), "python3 -m venv {} failed", venv.display());
                let installed = Command::new(&python)
                    .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", PYSPARK])
                    .status();
                assert!(
                    installed.is_ok_and(|s| s.success()) && imports(&python),
                    "the Spark test needs pyspark 4: pip install '{PYSPARK}' into {}, or set APRON_TEST_PYSPARK_PYTHON",
                    venv.display()
                );
            }
            python
        })
        .clone()
}
