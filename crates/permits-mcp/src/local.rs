//! The approval service for one person on one machine (`permitc mcp proxy --store FILE --table TABLE`): a
//! private `permitd serve` started beside the proxy on a loopback port, on the local SQLite store, with a
//! host key minted for this run (revoked when the proxy ends). The proxy is then its host exactly as with
//! `--service URL`; the person decides in the inbox it serves, or with `permitd` on the same store.
//!
//! It is `permitd` itself rather than the service linked into `permitc`: the inbox, its sign-in and the API
//! are the one implementation, and `permitc` (the compiler that CI hooks install) carries no tokio, axum,
//! argon2 or TLS stack.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use permits_runtime::Synchronous;

/// How long `permitd serve` may take to say where it listens, in seconds.
pub const START_SECONDS: u64 = 30;

/// How long the private service may take to stop once its lifeline closed, in seconds (its open
/// connections get 5), before it is killed.
pub const STOP_SECONDS: u64 = 8;

/// What the private service is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalOptions {
    /// The `permitd` binary.
    pub permitd: PathBuf,
    /// The compiled table (`permitc compile`); installed as the store's current table when it starts.
    pub table: PathBuf,
    /// The SQLite store (created when absent).
    pub store: PathBuf,
    /// The address to listen on (`127.0.0.1:0`: a port the system picks; give one to keep the inbox's URL
    /// from one run to the next).
    pub listen: String,
    /// The agents the minted host key is for (the proxy's agent and every agent of its chain).
    pub agents: Vec<String>,
    /// The service's audit copy (`permitd serve --audit`); `None`: `permitd`'s default, the store's path with
    /// `.audit.jsonl` appended (a PostgreSQL store needs one).
    pub audit: Option<PathBuf>,
    /// When a commit reaches the disk (`permitd serve --sync`; [`Synchronous::Group`] is its default).
    pub sync: Synchronous,
}

/// Why the private service could not start.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LocalError {
    /// `permitd` could not be run.
    #[error("cannot run `{permitd}`: {reason} (give its path with --permitd)")]
    Run {
        /// The binary.
        permitd: String,
        /// The operating system's reason.
        reason: String,
    },
    /// A `permitd` command failed.
    #[error("`permitd {command}` failed: {said}")]
    Failed {
        /// The subcommand.
        command: String,
        /// What it said on stderr, or how it ended.
        said: String,
    },
}

/// A running private service; stopped (and its host key revoked) when dropped. Its standard input is a pipe
/// whose other end only this process holds (`permitd serve --until-stdin-closes`): however the proxy ends —
/// `SIGTERM`, `SIGKILL`, a crash — the pipe closes, and the service stops and revokes the key itself
/// (`--revoke-on-exit`).
pub struct LocalService {
    child: Option<Child>,
    lifeline: Option<std::process::ChildStdin>,
    permitd: PathBuf,
    store: PathBuf,
    key_id: Option<String>,
    /// The service's base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    /// The host key minted for this run.
    pub key: String,
}

impl LocalService {
    /// Mints a host key for `options.agents` on the store (`permitd keys add`), then starts `permitd serve`
    /// on it and waits up to [`START_SECONDS`] for its `listening on URL` line. Its stderr is the proxy's.
    ///
    /// Errors: [`LocalError::Run`] when `permitd` cannot be run, [`LocalError::Failed`] when a command fails
    /// (a table that does not load or is older than the store's, an address in use, …): the key minted is
    /// revoked again.
    pub fn start(options: &LocalOptions) -> Result<LocalService, LocalError> {
        let (key, key_id) = mint(options)?;
        let mut service = LocalService {
            child: None,
            lifeline: None,
            permitd: options.permitd.clone(),
            store: options.store.clone(),
            key_id,
            url: String::new(),
            key,
        };
        let mut child = Command::new(&options.permitd)
            .arg("serve")
            .arg("--listen")
            .arg(&options.listen)
            .arg("--table")
            .arg(&options.table)
            .arg("--store")
            .arg(&options.store)
            .args(options.audit.iter().flat_map(|a| [std::ffi::OsStr::new("--audit"), a.as_os_str()]))
            .arg("--sync")
            .arg(options.sync.as_str().to_ascii_lowercase())
            .arg("--until-stdin-closes")
            .args(service.key_id.iter().flat_map(|id| ["--revoke-on-exit", id.as_str()]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| run_error(&options.permitd, &e))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(LocalError::Failed { command: "serve".into(), said: "no output pipe".into() });
        };
        service.lifeline = child.stdin.take();
        service.child = Some(child);
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::Builder::new().name("permitd-stdout".into()).spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let first = lines.next().and_then(Result::ok);
            let _ = tx.send(first);
            // Drained, so that permitd never blocks on a full pipe.
            for _ in lines {}
        });
        if let Err(e) = reader {
            return Err(LocalError::Failed { command: "serve".into(), said: format!("no thread to read it: {e}") });
        }
        match rx.recv_timeout(Duration::from_secs(START_SECONDS)) {
            Ok(Some(line)) if line.starts_with("listening on http://") => {
                service.url = line.trim_start_matches("listening on ").trim().to_string();
                Ok(service)
            }
            Ok(Some(line)) => {
                Err(LocalError::Failed { command: "serve".into(), said: format!("its first line was `{line}`") })
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let said = match service.child.as_mut().and_then(|c| c.wait().ok()) {
                    Some(status) => format!("it ended ({status}) before it listened: see its message above"),
                    None => "it ended before it listened".to_string(),
                };
                Err(LocalError::Failed { command: "serve".into(), said })
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Err(LocalError::Failed {
                command: "serve".into(),
                said: format!("it did not listen within {START_SECONDS} s"),
            }),
        }
    }

    /// Stops the service — its lifeline closed, then killed if it has not ended within [`STOP_SECONDS`] —
    /// and revokes the host key minted for this run (which the service has done itself when it stopped).
    pub fn stop(&mut self) {
        drop(self.lifeline.take());
        if let Some(mut child) = self.child.take() {
            let deadline = std::time::Instant::now() + Duration::from_secs(STOP_SECONDS);
            while matches!(child.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(id) = self.key_id.take() {
            let revoked = Command::new(&self.permitd)
                .args(["keys", "revoke", "--store"])
                .arg(&self.store)
                .arg(&id)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if !revoked.is_ok_and(|s| s.success()) {
                eprintln!("permitc mcp proxy: the host key {id} minted for this run could not be revoked");
            }
        }
    }
}

impl Drop for LocalService {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run_error(permitd: &Path, e: &std::io::Error) -> LocalError {
    LocalError::Run { permitd: permitd.display().to_string(), reason: e.to_string() }
}

/// `permitd keys add --store S --agents A,B --label …`: the token (stdout) and the key's id (`K-n`, from
/// its stderr line `permitd: key K-n is a host key for …`).
fn mint(options: &LocalOptions) -> Result<(String, Option<String>), LocalError> {
    let output = Command::new(&options.permitd)
        .args(["keys", "add", "--store"])
        .arg(&options.store)
        .arg("--agents")
        .arg(options.agents.join(","))
        .arg("--label")
        .arg(format!("permitc mcp proxy (process {}), revoked when it ends", std::process::id()))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| run_error(&options.permitd, &e))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let token = String::from_utf8_lossy(&output.stdout).trim().to_string();
    if !output.status.success() || token.is_empty() {
        return Err(LocalError::Failed { command: "keys add".into(), said: stderr.trim().to_string() });
    }
    let id = stderr
        .split_whitespace()
        .skip_while(|w| *w != "key")
        .nth(1)
        .filter(|w| w.starts_with("K-") && w[2..].chars().all(|c| c.is_ascii_digit()))
        .map(str::to_string);
    if id.is_none() {
        eprintln!("permitc mcp proxy: `permitd keys add` did not name the key it made: it is not revoked at the end");
    }
    Ok((token, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permitd_that_cannot_be_run_is_a_clear_error() {
        let dir = std::env::temp_dir().join(format!("permits-mcp-local-{}", std::process::id()));
        let options = LocalOptions {
            permitd: dir.join("no-such-permitd"),
            table: dir.join("t.json"),
            store: dir.join("s.db"),
            listen: "127.0.0.1:0".into(),
            agents: vec!["Scribe".into()],
            audit: None,
            sync: Synchronous::Group,
        };
        let Err(e) = LocalService::start(&options) else { panic!("a missing permitd started") };
        assert!(matches!(&e, LocalError::Run { permitd, .. } if permitd.ends_with("no-such-permitd")), "{e}");
        assert!(e.to_string().contains("(give its path with --permitd)"), "{e}");
        assert!(!dir.join("s.db").exists());
    }
}
