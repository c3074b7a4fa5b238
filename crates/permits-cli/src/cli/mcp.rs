//! `permitc mcp import` and `permitc mcp proxy` (issue #19): the commands of the `permits-mcp` crate.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use permits_mcp::import::{changes, import, read_existing, render};
use permits_mcp::lane::LaneOptions;
use permits_mcp::local::{LocalOptions, LocalService};
use permits_mcp::proxy::{Options, run};
use permits_mcp::upstream::{Handler, Server};

/// The server named by `--url` or `-- CMD ARGS…` (clap lets exactly one through); `None` (said on stderr)
/// for neither.
fn server(url: Option<&str>, command: &[String], example: &str) -> Option<Server> {
    if let Some(url) = url {
        return Some(Server::Url(url.to_string()));
    }
    let Some((cmd, args)) = command.split_first() else {
        errln!("error: name the MCP server's command after `--` or its URL with --url: {example}");
        return None;
    };
    Some(Server::Command { command: cmd.clone(), args: args.to_vec() })
}

/// `permitc mcp import [-o FILE] (--url URL | -- CMD ARGS…)`. Exit 0 written, 2 for a server that cannot be
/// started, reached or listed, a file that cannot be read, compared or written.
pub(crate) fn mcp_import(output: Option<&Path>, url: Option<&str>, command: &[String]) -> u8 {
    let Some(server) = server(url, command, "permitc mcp import -- npx -y @example/server") else {
        return 2;
    };
    let old = match output.filter(|p| p.exists()) {
        None => None,
        Some(path) => match std::fs::read_to_string(path) {
            Err(e) => {
                errln!("error: cannot read {}: {e}", path.display());
                return 2;
            }
            Ok(text) => match read_existing(&text) {
                Ok(old) => Some(old),
                Err(why) => {
                    errln!(
                        "error: {} does not parse, so it cannot be compared ({why}); fix it or write elsewhere",
                        path.display()
                    );
                    return 2;
                }
            },
        },
    };
    let handler: Handler = Arc::new(|_| {});
    let upstream = match server.start(serde_json::json!({}), handler) {
        Ok(u) => u,
        Err(e) => {
            errln!("error: {e}");
            return 2;
        }
    };
    let tools = match upstream.list_tools(Duration::from_secs(60)) {
        Ok(t) => t,
        Err(e) => {
            errln!("error: {e}");
            return 2;
        }
    };
    upstream.kill();
    let info = upstream.initialized.get("serverInfo");
    let server_name = info.and_then(|i| i.get("name")).and_then(|n| n.as_str()).unwrap_or("(unnamed)");
    let server_version = info.and_then(|i| i.get("version")).and_then(|n| n.as_str()).unwrap_or("");
    let server = format!("the MCP server `{server_name}` {server_version}").trim_end().to_string();
    let empty = BTreeMap::new();
    let imported = match import(&tools, old.as_ref().unwrap_or(&empty)) {
        Ok(i) => i,
        Err(e) => {
            errln!("error: {e}");
            return 2;
        }
    };
    let text = render(&imported, &server);
    let skipped = imported.iter().filter(|t| t.declaration.is_err()).count();
    match output {
        None => out!("{text}"),
        Some(path) => {
            if let Some(old) = &old {
                let lines = changes(old, &imported);
                if lines.is_empty() {
                    errln!("{}: no tool changed", path.display());
                }
                for l in lines {
                    errln!("{l}");
                }
            }
            let tmp = path.with_extension("permits.tmp");
            let written = std::fs::write(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
            if let Err(e) = written {
                let _ = std::fs::remove_file(&tmp);
                errln!("error: cannot write {}: {e}", path.display());
                return 2;
            }
        }
    }
    errln!(
        "imported {} tool{} from {server}{}",
        imported.len() - skipped,
        if imported.len() - skipped == 1 { "" } else { "s" },
        if skipped > 0 { format!(" ({skipped} could not be declared: see the comments)") } else { String::new() }
    );
    0
}

/// `--store`, `--table`, `--listen`, `--permitd`: the private service's arguments.
pub(crate) struct LocalArgs {
    pub(crate) store: PathBuf,
    pub(crate) table: PathBuf,
    pub(crate) listen: Option<String>,
    pub(crate) permitd: Option<PathBuf>,
    pub(crate) audit: Option<PathBuf>,
    pub(crate) sync: permits_runtime::Synchronous,
}

/// The `permitd` beside this `permitc`, else `permitd` (on PATH).
fn default_permitd() -> PathBuf {
    let name = format!("permitd{}", std::env::consts::EXE_SUFFIX);
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// The proxy's arguments as given (see `Command::Mcp`).
pub(crate) struct ProxyArgs {
    pub(crate) service: Option<String>,
    pub(crate) local: Option<LocalArgs>,
    pub(crate) key: Option<String>,
    pub(crate) agent: String,
    pub(crate) skill: String,
    pub(crate) requester: Option<String>,
    pub(crate) wait: u64,
    pub(crate) task: Option<String>,
    pub(crate) mode: Option<String>,
    pub(crate) via: Vec<String>,
    pub(crate) allow_resources: bool,
    pub(crate) allow_prompts: bool,
    pub(crate) url: Option<String>,
    pub(crate) command: Vec<String>,
}

/// `permitc mcp proxy …`: serves until stdin ends. Exit 0 then, 2 for bad arguments or a server that cannot
/// be started.
pub(crate) fn mcp_proxy(a: ProxyArgs) -> u8 {
    let Some(server) = server(a.url.as_deref(), &a.command, "permitc mcp proxy … -- npx -y @example/server") else {
        return 2;
    };
    let given = a.key.or_else(|| std::env::var("PERMITS_HOST_KEY").ok()).filter(|k| !k.trim().is_empty());
    let mut via = Vec::with_capacity(a.via.len());
    for text in &a.via {
        let Some(link) = crate::table::ChainLink::parse(text) else {
            errln!("error: --via is `AGENT.SKILL` (two names joined by one `.`), not `{text}`");
            return 2;
        };
        via.push((link.agent, link.skill));
    }
    // Kept until the proxy ends: dropping it stops the private service and revokes its key.
    let mut local = None;
    // The local mode runs the alone calls on the store itself (`permits_mcp::lane`): a SQLite file, with the
    // key it minted (a key given limits the agents, which only the service checks).
    let mut lane = None;
    let (service, key) = match (a.service, a.local) {
        (Some(service), _) => {
            if !(service.starts_with("http://") || service.starts_with("https://")) {
                errln!("error: --service is the approval service's URL, like http://127.0.0.1:7878");
                return 2;
            }
            let Some(key) = given else {
                errln!("error: give the host key with --key or in PERMITS_HOST_KEY (`permitd keys add` prints one)");
                return 2;
            };
            (service, key)
        }
        (None, Some(l)) => {
            let mut agents = vec![a.agent.clone()];
            for (agent, _) in &via {
                if !agents.contains(agent) {
                    agents.push(agent.clone());
                }
            }
            let options = LocalOptions {
                permitd: l.permitd.unwrap_or_else(default_permitd),
                table: l.table,
                store: l.store.clone(),
                listen: l.listen.unwrap_or_else(|| "127.0.0.1:0".into()),
                agents,
                audit: l.audit.clone(),
                sync: l.sync,
            };
            let started = match LocalService::start(&options) {
                Ok(s) => s,
                Err(e) => {
                    errln!("error: the private approval service on {} did not start: {e}", l.store.display());
                    return 2;
                }
            };
            errln!(
                "permitc mcp proxy: the approval service on {} is {} (its inbox: {}/inbox/, where a person signs in with the password `permitd people set-password --store {} NAME` set)",
                l.store.display(),
                started.url,
                started.url,
                l.store.display()
            );
            if given.is_none() && !permits_runtime::is_postgres_target(&l.store.to_string_lossy()) {
                let mut options = LaneOptions::beside(&options.table, &l.store);
                if let Some(audit) = l.audit {
                    options.audit = audit;
                }
                options.sync = l.sync;
                lane = Some(options);
            }
            let key = given.unwrap_or_else(|| started.key.clone());
            let url = started.url.clone();
            local = Some(started);
            (url, key)
        }
        (None, None) => {
            errln!(
                "error: give the approval service with --service URL, or a local store with --store FILE --table TABLE"
            );
            return 2;
        }
    };
    let options = Options {
        service,
        key: key.trim().to_string(),
        agent: a.agent,
        skill: a.skill,
        requester: a.requester,
        wait: a.wait,
        task: a.task,
        mode: a.mode,
        via,
        allow_resources: a.allow_resources,
        allow_prompts: a.allow_prompts,
        server,
        lane,
    };
    let stdin = std::io::stdin();
    let code = match run(options, stdin.lock(), std::io::stdout()) {
        Ok(()) => 0,
        Err(e) => {
            errln!("error: {e}");
            2
        }
    };
    drop(local);
    code
}
