//! `permitd`, the approval service (issue #16): the permits runtime on its SQLite store behind a versioned
//! JSON API, for hosts in any language.
//!
//! The HTTP API is a **transport of the runtime, not a second implementation**: every route is one call of
//! [`permits_runtime::Runtime`] (on tokio's blocking pool), so one store, one evaluator and one fingerprint
//! serve remote hosts exactly as embedded ones. The service is the store's only writer: hosts hold keys
//! limited to their agents, persons hold keys that act only as themselves, and no host key approves,
//! rejects, revokes, resolves or makes a rule.
//!
//! Since the service cannot call a host's callbacks, a host states the covered version with its call and
//! its claim, and runs tools itself through the execution protocol: **claim** (the runtime rechecks
//! everything and answers whom it runs as) → the host checks its own permissions and **confirms** or
//! **refuses** → the **receipt**.
//!
//! The modules, in the order a request meets them:
//!
//! | module | what it does |
//! |---|---|
//! | [`cli`] | the command line: `permitd serve`, `permitd keys add / list / revoke`, `permitd people set-password` |
//! | [`server`] | startup: the table, the store, the listener, reload on `SIGHUP`, the end on `SIGTERM` |
//! | [`tls`] | optional HTTPS (`--tls-cert`, `--tls-key`): rustls with ring, handshakes off the accept loop |
//! | `body` | bounded JSON bodies and queries: size, depth, unknown fields, errors as JSON |
//! | [`keys`] | host, person and admin keys: random tokens, stored as SHA-256 digests, revocable |
//! | `api` | the routes under `/v1/`, one file per family (offer, calls, proposals, executions, rules, …) |
//! | [`inbox`] | the decider's inbox: server-rendered pages under `/inbox/`, sign-in, sessions, CSRF, throttling |
//! | [`people`] | persons' inbox passwords (Argon2id) and sessions, beside the keys |
//! | [`webhooks`] | notifications of new proposals to a person's, a role's or a queue's webhook (Slack-compatible, no argument values) |
//! | `version_urls` | the URLs hosts register per tool, asked for the covered version when a person approves |
//! | `stated` | what a request states for the host's callbacks: the covered version, how arguments read |
//! | `metrics` | `/metrics` in Prometheus text |
//! | `audit` | the host sink: the audit events as JSON lines beside the store (the store's chain is the record) |
//! | `error` | every error as `{"error": {"code", "message"}}` with its HTTP status |

/// A line on stderr, as `eprintln!` writes it, except that a failed write is ignored: `eprintln!` panics
/// when stderr is closed (a supervisor that stopped reading the log: EPIPE), and a log line must never
/// take down the task that writes it (the `SIGHUP` reload, a webhook's notice, the inbox).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        // One `write` for the whole line: stderr is unbuffered, and `writeln!` would write each piece on
        // its own, interleaved with the lines of a process sharing it (`permitc mcp proxy` runs us so).
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::stderr().write_all(line.as_bytes());
    }};
}
pub(crate) use say;

pub mod cli;
pub mod inbox;
pub mod keys;
pub mod people;
pub mod server;
pub mod store;
pub mod tls;
pub mod webhooks;

mod api;
mod audit;
mod body;
mod error;
mod metrics;
mod stated;
mod version_urls;

/// The OpenAPI 3.1 document of the API, as served at `/v1/openapi.json` (checked in beside the crate's
/// `Cargo.toml`; the tests validate every response against it).
pub const OPENAPI: &str = include_str!("../openapi.json");
