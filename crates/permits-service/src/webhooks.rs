//! Notifications (issue #17): a webhook per person, role or queue, called once for each new proposal
//! waiting on them, with a Slack-compatible JSON body (`text`, and the same as a `blocks` section) that
//! carries the tool's label, the agent that asks, the person the work is for, who decides, and a link to
//! the proposal's page in the inbox — **never an argument value, and never a button that decides**: a
//! person signs in to decide.
//!
//! `--webhook TARGET=URL` (repeatable; TARGET `person:NAME`, `role:NAME` or `queue:NAME`) names them on the
//! command line, so only the operator chooses where the service calls out. A person's webhook is called for
//! a proposal that person decides (they are among its route's deciders); a role's or a queue's for a
//! proposal routed to it. Each URL is called at most once per proposal, whatever the number of targets it
//! serves, and a proposal is announced once ever: the ids announced are kept in the store
//! (`service_notified`), so a retried call (the same proposal) or a restart announces nothing again.
//!
//! **Delivery**: in the background (a request never waits for a webhook, and no store is held while one
//! is called), each URL in its own task. An attempt has [`TIMEOUT`] (5 s) to answer; one that cannot
//! connect, is cut off, does not answer in time or answers 5xx is tried again, at most [`ATTEMPTS`] times
//! in all, waiting [`BACKOFF`] (1 s, 2 s, 4 s) between attempts; a 4xx (or any other answer but 2xx) is
//! the receiver's refusal and is not tried again. Each failure is written to stderr, naming its target, not
//! its URL (which may hold a token).

use std::sync::{Arc, OnceLock, PoisonError};
use std::time::Duration;

use permits_runtime::table::Route;
use permits_runtime::{Proposal, Status};
use rusqlite::params;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::api::App;
use crate::keys::{Db, KeyStore};
use crate::version_urls::Target;

/// How long a webhook has to answer one attempt.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts of one delivery at most (the first and its retries).
pub const ATTEMPTS: usize = 4;
/// The waits before the second, third and fourth attempts.
pub const BACKOFF: [Duration; ATTEMPTS - 1] = [Duration::from_secs(1), Duration::from_secs(2), Duration::from_secs(4)];

/// Whom a webhook is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookTarget {
    /// A person: proposals they decide.
    Person(String),
    /// A role: proposals routed to it.
    Role(String),
    /// A queue: proposals routed to it.
    Queue(String),
}

impl std::fmt::Display for HookTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HookTarget::Person(n) => write!(f, "person:{n}"),
            HookTarget::Role(n) => write!(f, "role:{n}"),
            HookTarget::Queue(n) => write!(f, "queue:{n}"),
        }
    }
}

/// One `--webhook TARGET=URL`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Webhook {
    /// Whom it is for.
    pub target: HookTarget,
    /// The `http://` URL it posts to.
    pub url: String,
}

/// Reads `--webhook TARGET=URL`.
///
/// Errors: no `=`, a target other than `person:`, `role:` or `queue:` with a name, or a URL that is not a
/// plain `http://` URL.
pub fn parse(spec: &str) -> Result<Webhook, String> {
    let Some((target, url)) = spec.split_once('=') else {
        return Err(format!("`--webhook {spec}` is not TARGET=URL (`person:Noor=http://127.0.0.1:9000/hook`)"));
    };
    let target = match target.split_once(':') {
        Some(("person", n)) if !n.trim().is_empty() => HookTarget::Person(n.trim().to_string()),
        Some(("role", n)) if !n.trim().is_empty() => HookTarget::Role(n.trim().to_string()),
        Some(("queue", n)) if !n.trim().is_empty() => HookTarget::Queue(n.trim().to_string()),
        _ => return Err(format!("`--webhook {target}=…`: the target is `person:NAME`, `role:NAME` or `queue:NAME`")),
    };
    Target::parse(url).map_err(|e| format!("`--webhook`: {}", e.replacen("the version URL", "the URL", 1)))?;
    Ok(Webhook { target, url: url.to_string() })
}

/// The webhooks of a service.
#[derive(Debug, Default)]
pub(crate) struct Webhooks {
    hooks: Vec<Webhook>,
    /// `--public-url`, or `http://` and the bound address once it is known: the base of the links.
    base: OnceLock<String>,
}

impl Webhooks {
    pub(crate) fn new(hooks: Vec<Webhook>, public_url: Option<String>) -> Webhooks {
        let base = OnceLock::new();
        if let Some(url) = public_url {
            let _ = base.set(url.trim_end_matches('/').to_string());
        }
        Webhooks { hooks, base }
    }

    /// The base of the links, unless `--public-url` gave one.
    pub(crate) fn bound(&self, url: String) {
        let _ = self.base.set(url);
    }

    /// The URLs to call for `p`, each once, sorted, with the targets each serves.
    pub(crate) fn for_proposal(&self, p: &Proposal) -> Vec<(&str, Vec<&HookTarget>)> {
        let mut out: Vec<(&str, Vec<&HookTarget>)> = Vec::new();
        for hook in &self.hooks {
            let fires = match (&hook.target, &p.decider.route) {
                (HookTarget::Person(n), _) => p.decider.persons.iter().any(|d| d == n),
                (HookTarget::Role(n), Route::Role(r)) | (HookTarget::Queue(n), Route::Queue(r)) => n == r,
                _ => false,
            };
            if fires {
                match out.iter_mut().find(|(url, _)| *url == hook.url) {
                    Some((_, targets)) => targets.push(&hook.target),
                    None => out.push((&hook.url, vec![&hook.target])),
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// The Slack-compatible body for `p`: no argument values.
    pub(crate) fn body(&self, p: &Proposal) -> Value {
        let link = format!("{}/inbox/proposals/{}", self.base.get().map_or("", String::as_str), p.id);
        let label = permits_runtime::display::visible(&p.label);
        let whom = p
            .requester
            .as_deref()
            .map_or("for nobody (the agent's sponsor stands in)".to_string(), |r| format!("for {r}"));
        let text = format!(
            "{} asks to {} ({}, {whom}): waiting on {}. Sign in to decide: {link}",
            p.agent,
            quoted(&label),
            p.tool,
            p.decider.waiting_on()
        );
        let mrkdwn = format!(
            "*{}* — {} asks, {whom}; waiting on {}.\n<{link}|Open {} in the inbox> (sign in to decide)",
            slack_escape(&label),
            slack_escape(&p.agent),
            slack_escape(&p.decider.waiting_on()),
            p.id
        );
        json!({
            "text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": mrkdwn}}],
            "proposal": p.id,
            "link": link,
        })
    }
}

fn quoted(text: &str) -> String {
    format!("“{text}”")
}

/// Slack's three escapes for `mrkdwn` text.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

impl KeyStore {
    /// Records that proposal `id` was announced: `true` the first time, `false` ever after.
    ///
    /// Errors: the database failed.
    pub fn first_notice(&self, id: &str) -> Result<bool, String> {
        let changed = match &self.db {
            Db::Sqlite(conn) => conn
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .execute(
                    "INSERT INTO service_notified (proposal, at) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                    params![id, i64::try_from(crate::server::now()).unwrap_or(i64::MAX)],
                )
                .map_err(|e| format!("cannot record the notice: {e}"))?,
            Db::Postgres(pg) => pg.with(|client| {
                client
                    .execute(
                        "INSERT INTO service_notified (proposal, at) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                        &[&id, &i64::try_from(crate::server::now()).unwrap_or(i64::MAX)],
                    )
                    .map(|n| n as usize)
                    .map_err(|e| format!("cannot record the notice: {e}"))
            })?,
        };
        Ok(changed == 1)
    }
}

/// Announces `p` to its webhooks, in the background, if it is waiting and new.
pub(crate) fn notify(app: &Arc<App>, p: Proposal) {
    if p.status != Status::Waiting || app.webhooks.for_proposal(&p).is_empty() {
        return;
    }
    let app = app.clone();
    tokio::spawn(async move {
        let keys = app.clone();
        let id = p.id.clone();
        match tokio::task::spawn_blocking(move || keys.keys.first_notice(&id)).await {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => return,
            Ok(Err(e)) => return crate::say!("permitd: webhooks: {e}"),
            Err(_) => return crate::say!("permitd: webhooks: the notice failed inside the service"),
        }
        let body: Arc<str> = app.webhooks.body(&p).to_string().into();
        for (url, targets) in app.webhooks.for_proposal(&p) {
            let names = targets.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            tokio::spawn(deliver(url.to_string(), body.clone(), names, p.id.clone()));
        }
    });
}

/// One delivery of `body` to `url`: retried on a failure (see the module's documentation), never on a
/// refusal. `names` are the webhook's targets, for the log lines.
async fn deliver(url: String, body: Arc<str>, names: String, id: String) {
    for attempt in 1..=ATTEMPTS {
        let again = match tokio::time::timeout(TIMEOUT, post(&url, &body)).await {
            Ok(Ok(status)) if (200..300).contains(&status) => return,
            Ok(Ok(status)) if (500..600).contains(&status) => {
                format!("the webhook of {names} answered {status} for {id}")
            }
            Ok(Ok(status)) => {
                return crate::say!("permitd: the webhook of {names} answered {status} for {id}: not tried again");
            }
            Ok(Err(e)) => format!("the webhook of {names} failed for {id}: {e}"),
            Err(_) => format!("the webhook of {names} did not answer in {} s for {id}", TIMEOUT.as_secs()),
        };
        match BACKOFF.get(attempt - 1) {
            Some(wait) => {
                crate::say!("permitd: {again} (attempt {attempt} of {ATTEMPTS}; again in {} s)", wait.as_secs());
                tokio::time::sleep(*wait).await;
            }
            None => crate::say!("permitd: {again} (attempt {attempt} of {ATTEMPTS}): given up"),
        }
    }
}

/// POSTs `body` (JSON) to `url`: the answer's status.
async fn post(url: &str, body: &str) -> Result<u16, String> {
    let target = Target::parse(url)?;
    let host = target.host.trim_start_matches('[').trim_end_matches(']').to_string();
    let mut stream = tokio::net::TcpStream::connect((host.as_str(), target.port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        target.path,
        target.authority,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.map_err(|e| format!("cannot send: {e}"))?;
    let mut head = [0u8; 64];
    let n = stream.read(&mut head).await.map_err(|e| format!("no answer: {e}"))?;
    let line = String::from_utf8_lossy(&head[..n]);
    line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| "not an HTTP answer".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_are_read_from_the_command_line() {
        assert_eq!(
            parse("person:Noor=http://127.0.0.1:9/hook"),
            Ok(Webhook { target: HookTarget::Person("Noor".into()), url: "http://127.0.0.1:9/hook".into() })
        );
        assert!(parse("queue:Finance=http://hooks.example/x").is_ok());
        for bad in ["person:Noor", "team:X=http://127.0.0.1/", "role:=http://127.0.0.1/", "role:R=https://x/"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
