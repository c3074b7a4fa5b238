//! The example hosts the process tests start (`fencing` starts `lease_host`, `races` starts `race_host`):
//! [`example_exe`] builds one with cargo for this test binary, and [`HostProcess`] runs it as a child that
//! reads commands on stdin and answers in lines on stdout.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

type E = Box<dyn std::error::Error>;

/// How long one answer of a host may take before the test gives up on it.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The example `name` of this crate, built by cargo with `features` for this test binary's profile (a
/// no-op when it is current; `cargo test --test runtime` alone does not build examples, and a host left
/// over from before a change to the runtime would run old code), at `target/<profile>/examples/NAME`.
/// Each example is built once per test process; the tests that want it meanwhile wait for that build.
pub fn example_exe(name: &str, features: &[&str]) -> Result<PathBuf, E> {
    static BUILT: Mutex<BTreeMap<String, Result<PathBuf, String>>> = Mutex::new(BTreeMap::new());
    // The lock is held through the build; a test that panicked while holding it leaves the map usable.
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    built.entry(name.to_string()).or_insert_with(|| build_example(name, features)).clone().map_err(Into::into)
}

fn build_example(name: &str, features: &[&str]) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let profile = exe.parent().and_then(Path::parent).ok_or("the test binary has no profile folder")?;
    let host = profile.join("examples").join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--locked", "--quiet", "-p", "permits-runtime", "--example", name]);
    if !features.is_empty() {
        build.arg("--features").arg(features.join(","));
    }
    if profile.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build.current_dir(env!("CARGO_MANIFEST_DIR")).status().map_err(|e| e.to_string())?;
    if !status.success() || !host.is_file() {
        return Err(format!("`cargo build --example {name}` did not make {}", host.display()));
    }
    Ok(host)
}

/// One host process, its stdin, and its lines of output (read on a thread of their own, so that a host that
/// hangs cannot hang the test). Dropping it closes its stdin, which ends a host, and kills it if it has not
/// ended within five seconds.
pub struct HostProcess {
    /// The host's name in error messages (`host-a`, `host 2`).
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl HostProcess {
    /// Starts `command` with its stdin and stdout piped to the test and its stderr the test's own.
    pub fn start(name: impl Into<String>, mut command: Command) -> Result<HostProcess, E> {
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(HostProcess { name: name.into(), child, stdin, lines })
    }

    /// Writes `line` to the host's stdin.
    pub fn send(&mut self, line: &str) -> Result<(), E> {
        let stdin = self.stdin.as_mut().ok_or("the host's stdin is closed")?;
        writeln!(stdin, "{line}")?;
        stdin.flush()?;
        Ok(())
    }

    /// The host's next line of output, waiting up to [`ANSWER_TIMEOUT`] for it.
    pub fn line(&self) -> Result<String, E> {
        self.lines.recv_timeout(ANSWER_TIMEOUT).map_err(|e| format!("{}: no answer: {e}", self.name).into())
    }

    /// SIGKILL, and wait for the process to be gone.
    #[cfg_attr(not(feature = "postgres"), expect(dead_code, reason = "only the race tests kill a host"))]
    pub fn kill(&mut self) -> Result<(), E> {
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        // The end of stdin ends a host; a host that does not end in time is killed.
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
