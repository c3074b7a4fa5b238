//! The upstream server's standard input, written so that a thread that must not wait need not: whole
//! messages, one per line, from any thread ([`PipeWriter::send`]), or now and whole or not at all
//! ([`PipeWriter::try_send`]).
//!
//! The local mode's lane sends a read while it holds the store's write lock (the call decided and
//! admitted, its claim not yet written: `Runtime::claim_if_alone_sending`). A write that blocked there — a
//! server that stopped reading its input, a pipe full of earlier requests — would stall every writer of the
//! store, the approval service included. So our end of the pipe is non-blocking (on Unix): a message of at
//! most `PIPE_BUF` bytes (4,096 on Linux) is written whole or not at all (POSIX), and one that cannot be
//! written now is left for after the commit.

use std::io::{self, Write};
use std::process::ChildStdin;
use std::sync::{Mutex, TryLockError};

use crate::jsonrpc::Message;

/// Our end of a server's standard input ([`crate::upstream`]'s stdio link).
pub(crate) struct PipeWriter {
    stdin: Mutex<ChildStdin>,
    /// Whether our end is non-blocking ([`PipeWriter::try_send`] can write at all).
    nonblocking: bool,
}

impl PipeWriter {
    /// Takes the server's standard input and makes our end of it non-blocking (on Unix; elsewhere, or if
    /// that fails, every write blocks and [`PipeWriter::try_send`] writes nothing).
    pub(crate) fn new(stdin: ChildStdin) -> PipeWriter {
        let nonblocking = set_nonblocking(&stdin).is_ok();
        PipeWriter { stdin: Mutex::new(stdin), nonblocking }
    }

    /// Writes `message` and a newline, waiting for room in the pipe as long as it takes.
    ///
    /// Errors: the write's (a closed pipe: the server is gone); a poisoned lock.
    pub(crate) fn send(&self, message: &Message) -> io::Result<()> {
        let line = message.to_line().into_bytes();
        let mut stdin = self.stdin.lock().map_err(|_| io::Error::other("the writer's lock is poisoned"))?;
        write_waiting(&mut stdin, &line)
    }

    /// Writes `message` and a newline now, whole, or not at all: `Ok(true)` once written, `Ok(false)` when
    /// nothing was — the line is over `PIPE_BUF` bytes, the pipe has no room for it now, another thread is
    /// writing, or our end could not be made non-blocking. Never waits.
    ///
    /// Errors: the write's (a closed pipe: the server is gone).
    pub(crate) fn try_send(&self, message: &Message) -> io::Result<bool> {
        if !self.nonblocking {
            return Ok(false);
        }
        let line = message.to_line().into_bytes();
        if line.len() > ATOMIC_BYTES {
            return Ok(false);
        }
        let mut stdin = match self.stdin.try_lock() {
            Ok(s) => s,
            Err(TryLockError::WouldBlock) => return Ok(false),
            Err(TryLockError::Poisoned(_)) => return Err(io::Error::other("the writer's lock is poisoned")),
        };
        loop {
            return match stdin.write(&line) {
                Ok(n) if n == line.len() => Ok(true),
                // A pipe writes at most `PIPE_BUF` bytes whole or not at all; should a system write part of
                // it anyway, the rest follows at once: a line is never left half written.
                Ok(n) => write_waiting(&mut stdin, &line[n..]).map(|()| true),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Err(e),
            };
        }
    }
}

/// The most a pipe writes whole or not at all (POSIX `PIPE_BUF`).
#[cfg(unix)]
const ATOMIC_BYTES: usize = rustix::pipe::PIPE_BUF;
#[cfg(not(unix))]
const ATOMIC_BYTES: usize = 0;

/// Writes all of `bytes`, waiting for room whenever the pipe is full.
fn write_waiting(stdin: &mut ChildStdin, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match stdin.write(bytes) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the pipe took nothing")),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_for_room(stdin)?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    stdin.flush()
}

#[cfg(unix)]
fn set_nonblocking(stdin: &ChildStdin) -> io::Result<()> {
    use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
    let flags = fcntl_getfl(stdin)?;
    fcntl_setfl(stdin, flags | OFlags::NONBLOCK)?;
    Ok(())
}

#[cfg(not(unix))]
fn set_nonblocking(_: &ChildStdin) -> io::Result<()> {
    Err(io::Error::other("non-blocking pipes are Unix only here"))
}

/// Waits until the pipe has room (or its reader is gone: the next write says so).
#[cfg(unix)]
fn wait_for_room(stdin: &ChildStdin) -> io::Result<()> {
    use rustix::event::{PollFd, PollFlags, poll};
    let mut fds = [PollFd::new(stdin, PollFlags::OUT)];
    loop {
        match poll(&mut fds, None) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(not(unix))]
fn wait_for_room(_: &ChildStdin) -> io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Read;
    use std::process::{Command, Stdio};

    fn request(n: u64, text: &str) -> Message {
        Message::Request { id: json!(n), method: "tools/call".into(), params: Some(json!({"text": text})) }
    }

    /// A child that reads nothing for a while: the pipe fills, then drains.
    #[cfg(unix)]
    #[test]
    fn a_full_pipe_takes_nothing_now_and_a_send_waits_until_the_reader_drains_it() -> io::Result<()> {
        // The child reads nothing for a second, then copies its input: the pipe fills up before.
        let mut child =
            Command::new("sh").args(["-c", "sleep 1; cat"]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
        let stdin = child.stdin.take().ok_or_else(|| io::Error::other("no stdin"))?;
        let mut stdout = child.stdout.take().ok_or_else(|| io::Error::other("no stdout"))?;
        let writer = PipeWriter::new(stdin);
        assert!(writer.nonblocking);
        // Lines too long to be written whole or not at all are never tried.
        assert!(!writer.try_send(&request(0, &"x".repeat(ATOMIC_BYTES)))?);
        // Fill the pipe without waiting: each line goes whole, until one does not fit; nothing partial.
        let line = "y".repeat(1000);
        let mut sent = 0u64;
        while writer.try_send(&request(sent + 1, &line))? {
            sent += 1;
            assert!(sent < 10_000, "a pipe holds less than 10 MB");
        }
        assert!(sent >= 4, "a pipe holds a few lines: {sent}");
        // A waiting send gets through once the child reads (after its `sleep`).
        writer.send(&request(sent + 1, "last"))?;
        drop(writer);
        let mut out = String::new();
        stdout.read_to_string(&mut out)?;
        child.wait()?;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len() as u64, sent + 1);
        for (n, l) in lines.iter().enumerate() {
            let v: serde_json::Value = serde_json::from_str(l).map_err(io::Error::other)?;
            assert_eq!(v["id"], json!(n as u64 + 1), "each line whole and in order");
        }
        assert!(lines[lines.len() - 1].contains("\"last\""));
        Ok(())
    }
}
