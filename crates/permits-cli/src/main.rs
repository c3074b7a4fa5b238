//! `permitc`: the permits compiler's command line (spec §7). Everything lives in [`cli`].

mod cli;

use permits_compiler::{compile, diagnostics, diff, explain, fmt, graph, syntax};
use permits_runtime as runtime;
use permits_table as table;

fn main() -> std::process::ExitCode {
    cli::main()
}
