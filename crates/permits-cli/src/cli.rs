//! `permitc`, the command line (spec §7): `check`, `compile` (optionally signed), `keygen`, `explain`,
//! `decide` (optionally trusting signing keys), `test`, `diff`, `fmt`, `graph`, `audit verify`, and `mcp import` /
//! `mcp proxy` (permits in front of an MCP server, issue #19).
//!
//! Exit codes: 0 clean, 1 errors (or warnings with `--deny-warnings`), 2 usage or I/O. Human output goes
//! to stderr as miette diagnostics (graphical with colour on a terminal; without colour when stderr is
//! not a terminal or `NO_COLOR` is set); `--format json` writes one JSON document to stdout.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::compile::{self, Analysis, Output};
use crate::diagnostics::{Diagnostic, Severity, render};
use crate::explain::Explanation;
use crate::syntax::{self, Sources};
use crate::table::Level;

/// `println!` that ignores a closed pipe (`permitc check | head` must not panic).
macro_rules! outln {
    ($($t:tt)*) => {{ let _ = writeln!(std::io::stdout(), $($t)*); }};
}
/// `print!` that ignores a closed pipe.
macro_rules! out {
    ($($t:tt)*) => {{ let _ = write!(std::io::stdout(), $($t)*); }};
}
/// `eprintln!` that ignores a closed stderr.
macro_rules! errln {
    ($($t:tt)*) => {{ let _ = writeln!(std::io::stderr(), $($t)*); }};
}
/// `eprint!` that ignores a closed stderr.
macro_rules! err {
    ($($t:tt)*) => {{ let _ = write!(std::io::stderr(), $($t)*); }};
}

mod args;
mod commands;
mod json;
mod mcp;
mod output;
mod sarif;

use args::*;
use commands::*;
use json::*;
use mcp::*;
use output::*;
use sarif::*;

/// Runs `permitc` with the process's arguments and returns its exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let code = match cli.command {
        Command::Check { paths, format, deny_warnings } => check(&paths, format, deny_warnings),
        Command::Compile { path, output, format, deny_warnings, sign, serial } => {
            let signing = sign.as_deref().zip(serial);
            compile_cmd(&path, &output, format, deny_warnings, signing)
        }
        Command::Keygen { output } => keygen(&output),
        Command::Explain { agent, skill, tool, mode, via, path, format } => {
            explain(&path, &agent, &skill, &tool, mode.as_deref(), &via, format)
        }
        Command::Graph { paths, agent } => graph(&paths, agent.as_deref()),
        Command::Test { paths, format } => test(&paths, format),
        Command::Decide { table, agent, skill, tool, args, requester, mode, via, task, trust, format } => {
            let call = TripleCall {
                agent: &agent,
                skill: &skill,
                tool: &tool,
                args: args.as_deref(),
                requester: requester.as_deref(),
                mode: mode.as_deref(),
                via: &via,
                task: task.as_deref(),
            };
            decide(&table, &call, &trust, format)
        }
        Command::Audit { command: AuditCommand::Verify { file, head } } => audit_verify(&file, head.as_deref()),
        Command::Fmt { paths, check } => fmt(&paths, check),
        Command::Mcp { command: McpCommand::Import { output, url, command } } => {
            mcp_import(output.as_deref(), url.as_deref(), &command)
        }
        Command::Mcp {
            command:
                McpCommand::Proxy {
                    service,
                    store,
                    table,
                    listen,
                    permitd,
                    audit,
                    sync,
                    key,
                    agent,
                    skill,
                    requester,
                    wait,
                    task,
                    mode,
                    via,
                    allow_resources,
                    allow_prompts,
                    url,
                    command,
                },
        } => mcp_proxy(ProxyArgs {
            service,
            local: store.zip(table).map(|(store, table)| LocalArgs {
                store,
                table,
                listen,
                permitd,
                audit,
                sync: sync.map_or(permits_runtime::Synchronous::Group, Into::into),
            }),
            key,
            agent,
            skill,
            requester,
            wait,
            task,
            mode,
            via,
            allow_resources,
            allow_prompts,
            url,
            command,
        }),
        Command::Diff { old, new, format, fail_on_widen } => diff_cmd(&old, &new, format, fail_on_widen),
    };
    ExitCode::from(code)
}
