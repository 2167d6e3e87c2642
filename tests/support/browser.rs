//! A real browser for the tests: headless Chromium loads a page at a given
//! window width and hands back what a script in it measured, or prints the
//! page to PDF; `pdftotext` (poppler-utils) reads the PDF's text back.
//!
//! Chromium is `chromium` or `chromium-browser` on `PATH`, or the program
//! `APRON_TEST_CHROMIUM` names; `pdftotext` is on `PATH`. Neither is
//! installed by the tests (a browser is a system package with dozens of
//! libraries): `.ci/run` installs both with apt-get, and a machine without
//! them fails the test with a line that says how to install them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one Chromium run may take before the test fails.
const LIMIT: Duration = Duration::from_secs(120);

/// Whether `program --version` runs.
fn runs(program: &Path) -> bool {
    Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Chromium program; fails the test when there is none.
pub fn chromium() -> &'static Path {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND.get_or_init(|| {
        if let Some(program) = std::env::var_os("APRON_TEST_CHROMIUM") {
            let program = PathBuf::from(program);
            assert!(runs(&program), "APRON_TEST_CHROMIUM={} does not run", program.display());
            return program;
        }
        ["chromium", "chromium-browser"].into_iter().map(PathBuf::from).find(|p| runs(p)).unwrap_or_else(|| {
            panic!(
                "the report's browser tests need headless Chromium: apt-get install -y chromium (as .ci/run does), or set APRON_TEST_CHROMIUM"
            )
        })
    })
}

/// `pdftotext`; fails the test when there is none.
pub fn pdftotext() -> &'static Path {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND.get_or_init(|| {
        let program = PathBuf::from("pdftotext");
        let found = Command::new(&program)
            .arg("-v")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok();
        assert!(
            found,
            "the report's PDF test needs pdftotext: apt-get install -y poppler-utils (as .ci/run does)"
        );
        program
    })
}

/// What a Chromium run printed.
struct Printed {
    stdout: String,
}

/// Runs headless Chromium on the file `page` with `args` before it, at
/// most [`LIMIT`]; fails the test when it fails or takes longer.
fn run_chromium(page: &Path, args: &[String]) -> Printed {
    let profile = tempfile::tempdir().expect("a temporary profile folder");
    // Files, not pipes: a page's DOM (embedded images and all) is larger
    // than a pipe holds while nobody reads it.
    let (stdout, stderr) = (profile.path().join("stdout"), profile.path().join("stderr"));
    let file = |path: &Path| std::fs::File::create(path).expect("create an output file");
    let mut cmd = Command::new(chromium());
    // Root (as the tests run in CI) needs --no-sandbox; a profile of its
    // own keeps parallel runs apart.
    cmd.args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", profile.path().join("profile").display()))
        .args(args)
        .arg(file_url(page))
        .stdin(Stdio::null())
        .stdout(file(&stdout))
        .stderr(file(&stderr));
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", chromium().display()));
    let t0 = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {} within {LIMIT:?}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |path: &Path| String::from_utf8_lossy(&std::fs::read(path).unwrap_or_default()).into_owned();
    assert!(status.success(), "chromium on {}: {status}\n{}", page.display(), read(&stderr));
    Printed { stdout: read(&stdout) }
}

/// `file://` URL of an absolute path.
pub fn file_url(path: &Path) -> String {
    let path = std::path::absolute(path).expect("an absolute path");
    let mut url = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.' | b'~') {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    url
}

/// Loads `page` (an HTML file) in a window `width` px wide, runs `script`
/// (JavaScript, an expression whose value is JSON-encodable) once the page
/// and its images have loaded, and returns that value as JSON. The script
/// runs in a copy of the page beside it, so relative links resolve as they
/// do for the page itself.
pub fn measure(page: &Path, width: u32, script: &str) -> serde_json::Value {
    let html = std::fs::read_to_string(page).expect("read the page");
    let probe = page.with_file_name(".apron-probe.html");
    let tail = format!(
        "<script>window.addEventListener('load', () => {{ const pre = document.createElement('pre'); \
         pre.id = 'apron-probe'; pre.textContent = JSON.stringify(({script})); document.body.appendChild(pre); }});</script>\n"
    );
    std::fs::write(&probe, format!("{html}{tail}")).expect("write the probe page");
    let out = run_chromium(
        &probe,
        &[
            format!("--window-size={width},900"),
            "--hide-scrollbars".to_owned(),
            "--virtual-time-budget=10000".to_owned(),
            "--dump-dom".to_owned(),
        ],
    );
    std::fs::remove_file(&probe).expect("remove the probe page");
    let dom = out.stdout;
    let start = "<pre id=\"apron-probe\">";
    let json = dom
        .find(start)
        .map(|i| &dom[i + start.len()..])
        .and_then(|rest| rest.find("</pre>").map(|end| &rest[..end]))
        .unwrap_or_else(|| panic!("the probe script wrote nothing; the DOM ends: {}", tail_of(&dom, 400)));
    let json = json.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("the probe's JSON: {e}: {json}"))
}

/// The last `n` bytes of `text` (at a character boundary).
fn tail_of(text: &str, n: usize) -> &str {
    let mut at = text.len().saturating_sub(n);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

/// Prints `page` to the PDF file `pdf` as Chromium's print command does
/// (default paper, no header or footer lines) and returns its bytes.
pub fn print_to_pdf(page: &Path, pdf: &Path) -> Vec<u8> {
    run_chromium(page, &["--no-pdf-header-footer".to_owned(), format!("--print-to-pdf={}", pdf.display())]);
    std::fs::read(pdf).unwrap_or_else(|e| panic!("chromium wrote no {}: {e}", pdf.display()))
}

/// The text of `pdf` as `pdftotext` reads it, with `args` (`-layout`,
/// `-bbox`).
pub fn pdf_text(pdf: &Path, args: &[&str]) -> String {
    let out = Command::new(pdftotext())
        .args(args)
        .arg(pdf)
        .arg("-")
        .stdin(Stdio::null())
        .output()
        .expect("pdftotext runs");
    assert!(out.status.success(), "pdftotext {}: {}", pdf.display(), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("pdftotext writes UTF-8")
}
