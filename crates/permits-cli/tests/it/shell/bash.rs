//! The differential against real bash: for a line the lexer accepts, bash must run the same simple commands
//! with the same argvs, word for word. Lines the lexer refuses are never run.
//!
//! # The sandbox
//!
//! `/bin/bash -c PRELUDE\nLINE`, with an empty environment but `PATH` (a directory that does not exist, inside
//! a fresh temporary directory that is also the working directory) and `PERMITS_STATUS`, stdin from
//! `/dev/null`. The line is appended to a fixed prelude, not passed through `eval`, so bash parses it as
//! `sh -c` would. The prelude:
//!
//! 1. moves stdout to fd 63 (the record channel, a pipe this test reads to its end) and points fd 1 and
//!    fds 3–9 at `/dev/null`, so a duplication such as `4>&3` finds its descriptor open and no one-digit
//!    duplication can reach fd 63;
//! 2. defines `command_not_found_handle`, which bash calls, in a forked child, for every simple command it
//!    cannot find: it writes `$#` and the argv, each NUL-terminated, to fd 63 in one `printf` (one short
//!    write to a pipe, so concurrent pipeline members and background jobs never interleave), and returns
//!    `PERMITS_STATUS`;
//! 3. `set -r`: restricted mode, so a command name holding `/` (`/bin/rm`) is refused instead of run, and
//!    so is a hash-table entry holding one (`BASH_CMDS[t]=/bin/rm`); `readonly PATH SHELL ENV BASH_ENV`,
//!    because `set -r` (unlike `bash -r`) leaves them writable and `PATH=/usr/bin touch x` would run;
//! 4. disables every builtin but `printf` with `enable -n` (so `eval`, `exec`, `kill`, `cd`, `.`, `command`,
//!    `builtin`, `enable`, `set` ... all reach the handler like any unknown name).
//!
//! With `PATH` naming no directory, every name that is not a function and not an enabled builtin is "not
//! found". (An empty `PATH`, as in `env -i PATH=`, is not enough: bash then searches the current directory
//! and reports a missing file without calling the handler.) Nothing but bash itself ever runs:
//! `sandbox_runs_nothing` checks it with lines that would leave a file behind if anything did.
//!
//! Lines whose parts begin with `printf` (still a builtin), `command_not_found_handle` (the handler) or a name
//! holding `/` (refused by restricted mode, so not recorded) are skipped, and counted.
//!
//! # What is compared
//!
//! Each line runs twice, once with every command returning 0 and once with every command returning 1, so that
//! the right side of every `&&` runs in the first and of every `||` in the second. The expected records come
//! from the lexer's parts and separators with the same rule (a pipeline's status is its last command's; `;`,
//! `&` and a line feed start a new and-or list). When the line has a `|` or a `&`, the order in which
//! concurrent commands reach the handler is not fixed, so the records are compared as a multiset; otherwise in
//! order.

use super::{corpus, shown};
use permits::table::shell::{Separator, ShellLine, split};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const PRELUDE: &str = r#"exec 63>&1 1>/dev/null 3>/dev/null 4>/dev/null 5>/dev/null 6>/dev/null 7>/dev/null 8>/dev/null 9>/dev/null
command_not_found_handle() { printf '%s\0' "$#" "$@" >&63; [[ $PERMITS_STATUS == 0 ]]; }
set -r
readonly PATH SHELL ENV BASH_ENV
mapfile -t __permits_builtins < <(compgen -b)
for __permits_i in "${!__permits_builtins[@]}"; do [[ ${__permits_builtins[__permits_i]} == printf ]] && unset '__permits_builtins[__permits_i]'; done
enable -n "${__permits_builtins[@]}""#;

/// One argv: the words of one simple command, as bytes.
pub type Argv = Vec<Vec<u8>>;

/// A fresh temporary directory that is the working directory of every run, removed on drop.
pub struct Sandbox {
    dir: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("permits-shell-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Sandbox { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Runs `line` after the prelude; every command returns `status`. Returns the recorded argvs, in the order
    /// they reached the handler, and bash's stderr.
    pub fn run(&self, line: &str, status: u8) -> (Vec<Argv>, String) {
        let script = format!("{PRELUDE}\n{line}");
        let mut child = Command::new("/bin/bash")
            .arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", self.dir.join("no-such-directory"))
            .env("PERMITS_STATUS", status.to_string())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("/bin/bash: {e}"));
        let mut stdout = child.stdout.take().unwrap_or_else(|| unreachable!("piped"));
        let mut stderr = child.stderr.take().unwrap_or_else(|| unreachable!("piped"));
        let out = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stdout.read_to_end(&mut buf);
            buf
        });
        let err = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("bash did not finish in time on {}", shown(line));
                }
            }
        }
        let out = out.join().unwrap_or_default();
        let err = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
        (parse_records(&out, line), err)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Splits the record channel: `$#`, then that many arguments, each NUL-terminated.
fn parse_records(out: &[u8], line: &str) -> Vec<Argv> {
    let mut fields = out.split(|&b| b == 0);
    let mut records = Vec::new();
    while let Some(count) = fields.next() {
        if count.is_empty() {
            break; // the empty tail after the last NUL
        }
        let n: usize = std::str::from_utf8(count)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad record count {count:?} for {}", shown(line)));
        let argv: Argv = fields.by_ref().take(n).map(<[u8]>::to_vec).collect();
        assert_eq!(argv.len(), n, "truncated record for {}", shown(line));
        records.push(argv);
    }
    records
}

/// Why a line is not compared with bash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// A part begins with a name the sandbox cannot record.
    Unrecordable,
}

/// The argvs bash must record for `line` when every command returns `status`, from the lexer's reading.
pub fn expected(line: &ShellLine, status: u8) -> Result<Vec<Argv>, Skip> {
    let mut records = Vec::new();
    let mut previous: Option<Separator> = None;
    let mut pipeline_runs = true;
    for part in &line.parts {
        let first = part.words.first().map_or("", String::as_str);
        if first == "printf" || first == "command_not_found_handle" || first.contains('/') {
            return Err(Skip::Unrecordable);
        }
        // Every command returns `status`, so the status an `&&` or `||` tests is always `status`.
        let runs = match previous {
            None | Some(Separator::Semicolon | Separator::Background | Separator::Newline) => true,
            Some(Separator::Pipe) => pipeline_runs,
            Some(Separator::And) => status == 0,
            Some(Separator::Or) => status != 0,
        };
        pipeline_runs = runs;
        if runs {
            records.push(part.words.iter().map(|w| w.as_bytes().to_vec()).collect());
        }
        previous = part.followed_by;
    }
    Ok(records)
}

/// What happened when a line was compared with bash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The lexer refused it: never run.
    Refused,
    /// Accepted but not comparable.
    Skipped,
    /// Accepted, run twice, and bash agreed.
    Agreed,
}

/// Compares the lexer with bash on `line`; `Err` describes a disagreement.
pub fn compare(sandbox: &Sandbox, line: &str) -> Result<Outcome, String> {
    let Ok(parsed) = split(line) else { return Ok(Outcome::Refused) };
    let concurrent =
        parsed.parts.iter().any(|p| matches!(p.followed_by, Some(Separator::Pipe | Separator::Background)));
    for status in [0, 1] {
        let Ok(mut want) = expected(&parsed, status) else { return Ok(Outcome::Skipped) };
        let (mut got, stderr) = sandbox.run(line, status);
        if concurrent {
            want.sort();
            got.sort();
        }
        if want != got {
            return Err(format!(
                "{} (every command returning {status}):\n   lexer {}\n    bash {}\n  stderr {}",
                shown(line),
                render(&want),
                render(&got),
                stderr.trim_end()
            ));
        }
    }
    Ok(Outcome::Agreed)
}

fn render(records: &[Argv]) -> String {
    let records: Vec<String> = records
        .iter()
        .map(|argv| {
            let words: Vec<String> = argv.iter().map(|w| format!("{:?}", String::from_utf8_lossy(w))).collect();
            format!("[{}]", words.join(", "))
        })
        .collect();
    records.join(" ")
}

#[test]
fn corpus_agrees_with_bash() {
    let sandbox = Sandbox::new();
    let (mut agreed, mut skipped, mut failures) = (0, 0, Vec::new());
    for case in corpus::cases() {
        match compare(&sandbox, &case.line) {
            Ok(Outcome::Agreed) => agreed += 1,
            Ok(Outcome::Skipped) => skipped += 1,
            Ok(Outcome::Refused) => {}
            Err(e) => failures.push(format!("corpus line {}: {e}", case.number)),
        }
    }
    assert!(failures.is_empty(), "bash reads {} corpus lines differently:\n{}", failures.len(), failures.join("\n"));
    assert!(agreed >= 100, "only {agreed} corpus lines compared with bash ({skipped} skipped)");
    eprintln!("bash agreed on {agreed} corpus lines, {skipped} skipped");
}

/// The sandbox itself: lines that would leave a file behind if any program or dangerous builtin ran. They are
/// run without asking the lexer (most of them it refuses); a leak would only `touch` inside the sandbox.
#[test]
fn sandbox_runs_nothing() {
    let sandbox = Sandbox::new();
    let lines = [
        "/usr/bin/touch canary",
        "touch canary",
        "eval 'touch canary'",
        "exec /usr/bin/touch canary",
        "builtin eval /usr/bin/touch canary",
        "command -p touch canary",
        "enable eval; eval /usr/bin/touch canary",
        "source /dev/stdin <<< '/usr/bin/touch canary'",
        "PATH=/usr/bin:/bin touch canary",
        "set +r; /usr/bin/touch canary",
        "hash -p /usr/bin/touch t; t canary",
        "./canary-maker",
        "env touch canary; /usr/bin/env touch canary",
        "sh -c 'touch canary'",
        "PATH=/usr/bin; touch canary",
        "BASH_CMDS[t]=/usr/bin/touch; t canary",
        "BASH_CMDS[t]=/usr/bin/touch t canary",
        "declare -A BASH_CMDS; BASH_CMDS[t]=/usr/bin/touch; t canary",
        "t() { /usr/bin/touch canary; }; t",
        "command_not_found_handle() { /usr/bin/touch canary; }; x",
        "x=$(/usr/bin/touch canary)",
        "cat <(/usr/bin/touch canary)",
        "exec 5>canary",
        "x >canary",
    ];
    for line in lines {
        for status in [0, 1] {
            let _ = sandbox.run(line, status);
            assert!(!sandbox.dir().join("canary").exists(), "the sandbox ran something for {line:?}");
        }
    }
    // The handler is reached for builtins and keywords-as-arguments alike.
    let (got, _) = sandbox.run("eval x; exec y; kill -9 -1; cd /; enable z", 0);
    let names: Vec<&[u8]> = got.iter().filter_map(|argv| argv.first().map(Vec::as_slice)).collect();
    assert_eq!(names, [&b"eval"[..], b"exec", b"kill", b"cd", b"enable"]);
}

/// `%` at the start of a first word is why the lexer refuses it (a choice beyond the grammar): bash runs it
/// as `fg`, never as a command named `%1`.
#[test]
fn bash_reads_a_leading_percent_as_a_job() {
    let sandbox = Sandbox::new();
    let (got, stderr) = sandbox.run("%1 x", 0);
    assert!(got.is_empty(), "{got:?}");
    assert!(stderr.contains("fg"), "{stderr}");
}
