//! What the tests of this binary share: a temporary folder, and running the real `permitc`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A fresh folder under the system temp dir, removed when dropped (pass or fail). Each gets its own name
/// (the label, the process, a counter), so tests running in parallel never share one.
pub(crate) struct Temp(pub(crate) PathBuf);

impl Temp {
    pub(crate) fn new(label: &str) -> Temp {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("permits-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        Temp(dir)
    }

    /// The path of `rel` inside the folder.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    /// Writes `bytes` to `rel` (creating folders) and returns its path.
    pub(crate) fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("create dirs");
        std::fs::write(&p, bytes).expect("write fixture");
        p
    }

    /// Creates the folder `rel` and returns its path.
    pub(crate) fn mkdir(&self, rel: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(&p).expect("mkdir");
        p
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What one run of `permitc` gave.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) raw_stdout: Vec<u8>,
}

fn root() -> &'static Path {
    crate::root()
}

/// Runs permitc (killed after a minute: a loop must not hang the test suite) and checks it did not panic.
pub(crate) fn permitc<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let shown = args.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ");
    let mut child = Command::new(env!("CARGO_BIN_EXE_permitc"))
        .args(args)
        .current_dir(root())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("permitc runs");
    // Read both pipes on threads so a large output cannot block the child.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out, &mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err, &mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("permitc {shown} did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let raw = t_out.join().expect("stdout thread");
    let run = Run {
        code: status.code().unwrap_or(-1),
        raw_stdout: raw.clone(),
        stdout: String::from_utf8_lossy(&raw).into_owned(),
        stderr: String::from_utf8_lossy(&t_err.join().expect("stderr thread")).into_owned(),
    };
    assert!(!run.stderr.contains("panicked"), "permitc {shown} panicked:\n{}", run.stderr);
    assert_ne!(run.code, 101, "permitc {shown} exited 101 (a panic):\n{}", run.stderr);
    assert!(!run.stderr.contains("overflow"), "permitc {shown} overflowed:\n{}", run.stderr);
    assert!(status.code().is_some(), "permitc {shown} was killed by a signal (stack overflow?): {status:?}");
    run
}

/// A miette diagnostic as rendered on stderr (no colour), as its words: the code, `×`, the message, `help:`
/// and the help, joined by single spaces, the `│` of a wrapped line dropped and a word miette broke after a
/// hyphen (`JSON-` ⏎ `lines`) joined again. What the diagnostic says, whatever the width it was wrapped at.
pub(crate) fn diagnostic_words(stderr: &str) -> String {
    let mut out = String::new();
    for word in stderr.split_whitespace().filter(|w| *w != "│") {
        let broken_after_hyphen = out.ends_with('-') && !out.ends_with(" -");
        if !out.is_empty() && !broken_after_hyphen {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}
