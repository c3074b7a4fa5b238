//! Startup and the end: the table, the runtime on its SQLite store, the listener, `SIGHUP` reloading the
//! table, and a graceful end on `SIGTERM` or Ctrl-C.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use permits_runtime::table::Table;
use permits_runtime::{Authority, PostgresStore, Principal, Runtime, SqliteStore, TableSignature, TrustedKeys};
use serde_json::Value;

use crate::api::{self, App};
use crate::audit::{AuditLog, Sink};
use crate::cli::ServeArgs;
use crate::keys::KeyStore;

/// The time now, in seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// The runtime's [`Authority`] in the service: it admits nobody, because a host's permissions are asked
/// through the execution protocol (the host confirms or refuses each claim) and never through a callback.
/// No route calls the runtime's closure-based `execute`, `run_alone` or `call`; if one ever did, it would
/// fail closed.
#[derive(Clone, Copy, Debug)]
struct HostConfirms;

impl Authority for HostConfirms {
    fn admits(&self, _: Principal<'_>, _: &str, _: &Value) -> Result<(), String> {
        Err("the host confirms each execution itself: claim it, then confirm or refuse".into())
    }
}

/// `permitd serve`: runs until `SIGTERM` or Ctrl-C.
///
/// Errors: `--trust` (signed tables are not verified by this runtime yet), a table that does not load,
/// a store or an audit log that cannot be opened, a TLS certificate or key that does not load, a
/// trusted-header option without its secret, an address that cannot be bound.
pub fn serve(args: &ServeArgs) -> Result<(), String> {
    let trusted = trusted_keys(&args.trust)?;
    let table = Table::load_path(&args.table).map_err(|e| e.to_string())?;
    let signature = read_signature(&args.table)?;
    let rt = Runtime::new(table, HostConfirms);
    let timeout = std::time::Duration::from_millis(args.version_url_timeout_ms);
    // `--store postgres://…` (issue #22): a database shared with other instances and hosts. Its audit log
    // cannot sit beside a file, so `--audit` names it; its durability is the server's (`synchronous_commit`).
    let (rt, audit_path, storage, versions) = match crate::store::location(&args.store) {
        crate::store::Location::Postgres(url) => {
            let Some(audit) = args.audit.clone() else {
                return Err("with a PostgreSQL store, `--audit FILE` names this instance's audit log".into());
            };
            let storage = crate::api::Storage { journal_mode: "postgresql".into(), synchronous: "server" };
            let store = PostgresStore::connect(url).map_err(|e| e.to_string())?;
            (rt.with_store(store), audit, storage, crate::version_urls::VersionUrls::unavailable(timeout))
        }
        crate::store::Location::File(path) => {
            let store = SqliteStore::open(path).map_err(|e| e.to_string())?;
            // Issue #16: every state change durably committed: `--sync group` (the default) and `--sync full`
            // answer a commit only once it is synced.
            let synchronous = store.set_synchronous(args.sync.into()).map_err(|e| e.to_string())?;
            let storage = crate::api::Storage {
                journal_mode: store.journal_mode().map_err(|e| e.to_string())?,
                synchronous: synchronous.as_str(),
            };
            let versions = crate::version_urls::VersionUrls::open(path, args.version_url_host.clone(), timeout)?;
            let audit = args.audit.clone().unwrap_or_else(|| {
                let mut audit = path.as_os_str().to_owned();
                audit.push(".audit.jsonl");
                PathBuf::from(audit)
            });
            (rt.with_store(store), audit, storage, versions)
        }
    };
    let keys = KeyStore::open(&args.store)?;
    let hooks = args.webhook.iter().map(|w| crate::webhooks::parse(w)).collect::<Result<Vec<_>, _>>()?;
    let webhooks = crate::webhooks::Webhooks::new(hooks, args.public_url.clone());
    // Optional TLS: a bad certificate or key ends the start here, before anything is bound or served.
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::config(cert, key)?),
        (None, None) => None,
        _ => return Err("give both `--tls-cert` and `--tls-key`, or neither".into()),
    };
    let single_sign_on = crate::inbox::Trusted::from_args(args)?;
    let secure = args.secure_cookies || tls.is_some();
    let inbox = crate::inbox::Inbox::new(args.fresh_sign_in, args.require_totp, secure).with_trusted(single_sign_on);
    let audit = Arc::new(AuditLog::open(&audit_path)?);
    let mut rt = rt
        .with_versions(crate::stated::Stated)
        .with_naming(crate::stated::Stated)
        .with_audit(Sink(audit.clone()))
        .with_trusted_keys(trusted);
    if let Some(signature) = signature {
        rt = rt.with_signature(signature);
    }
    // Spec §5a "One current table per store": the table given is installed as the store's current one (a
    // restart with the same table changes nothing); an older or unsigned one is refused, and the service
    // does not start.
    rt.install_table().map_err(|e| format!("the table `{}` is not installed: {e}", args.table.display()))?;
    let app = Arc::new(App::new(rt, keys, versions, storage, audit, args.table.clone(), inbox, webhooks));
    // The lifeline, watched on a thread of its own (a blocking read of stdin on the runtime's pool would
    // hold up the runtime's end).
    let lifeline = if args.until_stdin_closes { Some(stdin_closed()?) } else { None };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let served = tokio.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .map_err(|e| format!("cannot listen on `{}`: {e}", args.listen))?;
        let addr = listener.local_addr().map_err(|e| format!("cannot read the bound address: {e}"))?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        // A supervisor (and the tests) read this one line to find the port: it is flushed before serving.
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on {scheme}://{addr}").and_then(|()| stdout.flush()).map_err(|e| e.to_string())?;
        drop(stdout);
        app.webhooks.bound(format!("{scheme}://{addr}"));
        crate::say!(
            "permitd: store `{}` (journal_mode={}, synchronous={})",
            args.store.display(),
            app.storage.journal_mode,
            app.storage.synchronous
        );
        tokio::spawn(reload_on_hangup(app.clone()));
        let service = api::router(app).into_make_service_with_connect_info::<std::net::SocketAddr>();
        // Stopping: connections are given `GRACE_SECONDS` to finish (an inbox's event stream never does).
        let stop = Arc::new(tokio::sync::Notify::new());
        let ended = {
            let stop = stop.clone();
            async move {
                ended(lifeline).await;
                stop.notify_one();
            }
        };
        let grace = async move {
            stop.notified().await;
            tokio::time::sleep(std::time::Duration::from_secs(GRACE_SECONDS)).await;
        };
        let serving = async move {
            match tls {
                Some(config) => {
                    use axum::serve::ListenerExt;
                    let listener = crate::tls::TlsListener::new(listener, config)
                        .map_err(|e| format!("cannot read the bound address: {e}"))?
                        // `tap_io` only so that axum hands each connection's peer address to the routes.
                        .tap_io(|_| {});
                    axum::serve(listener, service).with_graceful_shutdown(ended).await.map_err(|e| e.to_string())
                }
                None => axum::serve(listener, service).with_graceful_shutdown(ended).await.map_err(|e| e.to_string()),
            }
        };
        tokio::select! {
            served = serving => served,
            () = grace => Ok(()),
        }
    });
    if let Some(id) = &args.revoke_on_exit {
        match KeyStore::open(&args.store).and_then(|keys| keys.revoke(id, now())) {
            Ok(_) => crate::say!("permitd: the host key {id} is revoked, as the service stopped"),
            Err(why) => crate::say!("permitd: the host key {id} could not be revoked: {why}"),
        }
    }
    served
}

/// How long a stopping service waits for its open connections, in seconds.
const GRACE_SECONDS: u64 = 5;

/// A receiver that resolves when standard input ends (or cannot be read): `--until-stdin-closes`.
fn stdin_closed() -> Result<tokio::sync::oneshot::Receiver<()>, String> {
    use std::io::Read;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("permitd-lifeline".into())
        .spawn(move || {
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = tx.send(());
        })
        .map_err(|e| format!("cannot watch standard input (--until-stdin-closes): {e}"))?;
    Ok(rx)
}

/// The keys `--trust` names: 64 hex digits each, or a `.pub` file from `permitc keygen`.
fn trusted_keys(trust: &[String]) -> Result<TrustedKeys, String> {
    let mut keys = Vec::new();
    for t in trust {
        let path = std::path::Path::new(t);
        if path.is_file() {
            keys.push(std::fs::read_to_string(path).map_err(|e| format!("cannot read the key `{t}`: {e}"))?);
        } else {
            keys.push(t.clone());
        }
    }
    TrustedKeys::from_hex(keys.iter().map(String::as_str)).map_err(|e| format!("`--trust`: {e}"))
}

/// The signature beside a table file (`TABLE.sig`, written by `permitc compile --sign`), if there is one.
pub(crate) fn read_signature(table: &std::path::Path) -> Result<Option<TableSignature>, String> {
    let mut name = table.as_os_str().to_owned();
    name.push(permits_runtime::signing::SIGNATURE_SUFFIX);
    let path = PathBuf::from(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("`{}` is not a table signature: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read `{}`: {e}", path.display())),
    }
}

/// Reloads the table from its file on every `SIGHUP` (through [`App::install`]: the old table stays when
/// the new one is refused).
async fn reload_on_hangup(app: Arc<App>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            crate::say!("permitd: cannot listen for SIGHUP: reload with POST /v1/admin/table");
            return;
        };
        while hangups.recv().await.is_some() {
            let app = app.clone();
            let path = app.table_path.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                let read = std::fs::read(&path)
                    .map_err(|e| format!("cannot read `{}`: {e}", path.display()))
                    .and_then(|bytes| Ok((bytes, read_signature(&path)?)));
                match read {
                    Ok((bytes, signature)) => app.install(&bytes, signature).map_err(|e| e.message),
                    Err(e) => {
                        app.metrics.reload("refused");
                        Err(e)
                    }
                }
            })
            .await;
            match outcome {
                Ok(Ok(digest)) => crate::say!("permitd: SIGHUP: installed the table {digest}"),
                Ok(Err(e)) => crate::say!("permitd: SIGHUP: {e}"),
                Err(e) => crate::say!("permitd: SIGHUP: the reload failed, the old table stays: {e}"),
            }
        }
    }
    #[cfg(not(unix))]
    drop(app);
}

/// Resolves on `SIGTERM` or Ctrl-C, or when `lifeline` (`--until-stdin-closes`) says standard input ended.
async fn ended(lifeline: Option<tokio::sync::oneshot::Receiver<()>>) {
    let closed = async move {
        match lifeline {
            // Sent or dropped, the input has ended.
            Some(rx) => {
                let _ = rx.await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = closed => {}
            }
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
            () = closed => {}
        }
    }
    #[cfg(not(unix))]
    {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = closed => {}
        }
    }
}
