//! Apache Spark for tests/it/portable.rs: a Python with pyspark 4, run in local
//! mode (no cluster, no network but 127.0.0.1; Java 17 from the machine).
//!
//! The Python is `$APRON_TEST_PYSPARK_PYTHON`, else the virtual
//! environment `<target>/tools/spark-venv`, created there on first use with
//! `python3 -m venv` and `pip install 'pyspark>=4,<5'` (`.ci/run` creates
//! it beforehand).

use std::path::PathBuf;
use std::sync::OnceLock;

/// The pyspark versions the tests run.
pub const PYSPARK: &str = "pyspark>=4,<5";

/// A Python that imports pyspark 4, installed on first use when there is none.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            super::venv_python(
                "spark-venv",
                "APRON_TEST_PYSPARK_PYTHON",
                &[PYSPARK],
                |python| {
                    super::python_runs(
                        python,
                        "import pyspark, sys; sys.exit(0 if pyspark.__version__.startswith('4.') else 1)",
                    )
                },
                "the Spark test needs pyspark 4",
            )
        })
        .clone()
}
