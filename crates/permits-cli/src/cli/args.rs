//! The command line's arguments (clap).

use super::*;

/// The permits compiler: check `.permits` packages, compile them to a decision table, explain a decision.
#[derive(Debug, Parser)]
#[command(name = "permitc", version, about, long_about = None)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Debug, Subcommand)]
pub(super) enum Command {
    /// Check packages: each PATH is one package (a folder of `.permits` files, or one file).
    Check {
        /// The packages.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format: `sarif` is SARIF 2.1.0 for code-scanning tools.
        #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
        format: CheckFormat,
        /// Fail (exit 1) on warnings too.
        #[arg(long)]
        deny_warnings: bool,
    },
    /// Compile one package to a decision table (written atomically).
    Compile {
        /// The package.
        path: PathBuf,
        /// Where to write the table (`-` for stdout).
        #[arg(short, long)]
        output: PathBuf,
        /// Output format of diagnostics.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Fail (exit 1, no table written) on warnings too.
        #[arg(long)]
        deny_warnings: bool,
        /// Sign the table with this secret key file (`permitc keygen`): writes `OUTPUT.sig` beside it; the
        /// table's bytes are unchanged. Needs `--serial`.
        #[arg(long, requires = "serial")]
        sign: Option<PathBuf>,
        /// The signature's serial: a positive integer that grows with each release (a CI build number).
        #[arg(long, requires = "sign", value_parser = clap::value_parser!(u64).range(1..))]
        serial: Option<u64>,
    },
    /// Make an Ed25519 key pair for signing tables: the secret key in FILE, the public key in FILE.pub.
    Keygen {
        /// Where to write the secret key (a file, not `-`; neither it nor `FILE.pub` may exist); the public
        /// key goes to `FILE.pub`.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Explain the decision for one (agent, skill, tool): level, route, every reason, witness paths.
    Explain {
        /// The agent.
        #[arg(long)]
        agent: String,
        /// The skill.
        #[arg(long)]
        skill: String,
        /// The tool.
        #[arg(long)]
        tool: String,
        /// The mode the call is made in (spec §3c): its layer is one more, and its rules are among the
        /// reasons. An unknown mode is an error (exit 2).
        #[arg(long)]
        mode: Option<String>,
        /// A delegating link `AGENT.SKILL` of the call's chain (spec §3b), nearest first; repeatable. Each
        /// link's layers are shown; an undeclared link is an error (exit 2).
        #[arg(long = "via", value_name = "AGENT.SKILL")]
        via: Vec<String>,
        /// The package.
        path: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Every triple whose decision changed from OLD to NEW (each a package or a compiled table),
    /// widenings marked.
    Diff {
        /// The old package (a folder or `.permits` file) or compiled table (`.json`).
        old: PathBuf,
        /// The new package or compiled table.
        new: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Exit 1 when anything widens.
        #[arg(long)]
        fail_on_widen: bool,
    },
    /// Run the packages' `test` blocks: each expectation of a level for a triple.
    Test {
        /// The packages.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Decide one call against a compiled table, as the runtime would; the decision as JSON.
    Decide {
        /// The compiled table (`permitc compile`).
        #[arg(long)]
        table: PathBuf,
        /// The agent.
        #[arg(long)]
        agent: String,
        /// The skill.
        #[arg(long)]
        skill: String,
        /// The tool.
        #[arg(long)]
        tool: String,
        /// The call's arguments as a JSON object, e.g. `{"repair": "T-7", "price": 45}`.
        #[arg(long)]
        args: Option<String>,
        /// The person the work is for (default: nobody, so the agent's sponsor).
        #[arg(long)]
        requester: Option<String>,
        /// The mode the call is made in (spec §3c); an unknown mode decides `never`.
        #[arg(long)]
        mode: Option<String>,
        /// A delegating link `AGENT.SKILL` of the call's chain (spec §3b), nearest first; repeatable. A link
        /// that is not a declared delegation decides `never`; one without a `.` is a usage error (exit 2).
        #[arg(long = "via", value_name = "AGENT.SKILL")]
        via: Vec<String>,
        /// The task (operation key) the call belongs to (spec §5a). `decide` has no ledger: the task has no
        /// binding yet and nothing spent, so a spend from a budget with `per_task` shows the task's figures
        /// with nothing spent (the `task` and `spend` members of the JSON).
        #[arg(long)]
        task: Option<String>,
        /// Trust this public key (64 hex digits, or a `.pub` file from `permitc keygen`); repeatable. The
        /// table must then be signed by one of them (`TABLE.sig`), or nothing is decided (exit 2).
        #[arg(long)]
        trust: Vec<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
    },
    /// Rewrite `.permits` files in the canonical layout (comments kept; decisions unchanged).
    Fmt {
        /// Files or package folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Write nothing; list the files that would change and exit 1 if any would.
        #[arg(long)]
        check: bool,
    },
    /// permits in front of an MCP server (issue #19): `import` its tools as pinned extern tools, or run the
    /// `proxy` that puts every `tools/call` through the approval service.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// The audit chain (spec §5a): `permitc audit verify FILE` checks a store (an SQLite file, or a PostgreSQL
    /// database as `postgres://…` or `host=… dbname=…`) or a JSON-lines export.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Print the call graph, each node with its effect set, as Graphviz DOT (one `digraph` per package).
    Graph {
        /// The packages.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Only what this agent is offered, and what it calls, with the level in each skill.
        #[arg(long)]
        agent: Option<String>,
    },
}

// Parsed once per run: the size of `Proxy`'s many options is of no account.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(super) enum McpCommand {
    /// Connect to an MCP server (started as `-- CMD ARGS…` on stdio, or at `--url` over streamable HTTP), list
    /// its tools, and write `.permits` declarations for them: typed parameters, the widest claim for you to
    /// confirm (the server's hints as a comment), and a pin of each tool's definition. With `-o` over an
    /// existing file: what changed, field by field, on stderr, and the claims of unchanged tools kept. Exit 0
    /// written, 2 when the server or the file fails.
    Import {
        /// Write here instead of stdout (replacing the file).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// The server's streamable-HTTP endpoint (`http://127.0.0.1:8000/mcp`) instead of a command; plain
        /// http only, no OAuth.
        #[arg(long)]
        url: Option<String>,
        /// The server's command and its arguments, after `--`.
        #[arg(last = true, required_unless_present = "url", conflicts_with = "url")]
        command: Vec<String>,
    },
    /// An MCP server on stdio for the agent in front of the MCP server `CMD ARGS…` (or at `--url`): it lists only the tools
    /// the skill offers (not `never`, definition unchanged since pinned) and puts every `tools/call` through
    /// the approval service at `--service` (or a private one it starts on `--store`), as a host. Serves until
    /// stdin ends.
    Proxy {
        /// The approval service's URL (`permitd serve` prints it): `http://127.0.0.1:7878`.
        #[arg(long, required_unless_present = "store", conflicts_with = "store")]
        service: Option<String>,
        /// For one person on one machine, instead of --service: start a private `permitd serve` on this
        /// SQLite store (created when absent) on loopback, with a host key minted for this run; the person
        /// decides in the inbox it serves (its URL is logged) or with `permitd` on the same store.
        #[arg(long, requires = "table")]
        store: Option<PathBuf>,
        /// With --store: the compiled table the private service runs (`permitc compile`).
        #[arg(long, requires = "store")]
        table: Option<PathBuf>,
        /// With --store: where the private service listens (a port the system picks by default; give one,
        /// `127.0.0.1:7878`, to keep the inbox's URL from one run to the next).
        #[arg(long, requires = "store")]
        listen: Option<String>,
        /// With --store: the `permitd` binary (by default the one beside `permitc`, else `permitd` on PATH).
        #[arg(long, requires = "store")]
        permitd: Option<PathBuf>,
        /// With --store: the private service's audit copy, JSON lines (`permitd serve --audit`; by default
        /// the store's path with `.audit.jsonl` appended; needed with a PostgreSQL --store).
        #[arg(long, requires = "store")]
        audit: Option<PathBuf>,
        /// With an SQLite --store: when a commit reaches the disk, for the proxy's own alone calls and the
        /// private service alike (`permitd serve --sync`). `group` (the default): a call's run is on the disk
        /// before its answer leaves the proxy (and before a tool that does more than read is sent), so a power
        /// loss never loses a run the agent saw; `full`: SQLite syncs every commit; `normal`: synced at checkpoints only,
        /// so answers wait for no sync, but a power loss or an operating-system crash may lose the last runs
        /// (a crash of the proxy loses nothing).
        #[arg(long, value_enum, requires = "store")]
        sync: Option<SyncArg>,
        /// The host key (`permitd keys add --agents AGENT`); or set PERMITS_HOST_KEY. With --store, one is
        /// minted for the run when none is given.
        #[arg(long)]
        key: Option<String>,
        /// The agent the calls are made as.
        #[arg(long)]
        agent: String,
        /// The skill it works in.
        #[arg(long)]
        skill: String,
        /// The person the work is for.
        #[arg(long = "for")]
        requester: Option<String>,
        /// How long a proposed call waits for a person's decision before the agent is told it waits, in
        /// seconds (0 to 3600).
        #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u64).range(0..=3600))]
        wait: u64,
        /// The operation key of the task (a retried call attaches to its proposal); a new one per run when
        /// not given.
        #[arg(long)]
        task: Option<String>,
        /// The mode the task runs in (spec §3c): `tools/list` offers only what is not `never` in it, and every
        /// call is made in it (the task's first call binds it).
        #[arg(long)]
        mode: Option<String>,
        /// A delegating link `AGENT.SKILL` of the agent's chain (spec §3b), nearest first; repeatable: the
        /// offer is the chain's and every call is made along it (the host key must hold every agent of it).
        #[arg(long = "via", value_name = "AGENT.SKILL")]
        via: Vec<String>,
        /// Pass `resources/*` through (off: reading a resource is a read the policy has not seen).
        #[arg(long)]
        allow_resources: bool,
        /// Pass `prompts/*` through.
        #[arg(long)]
        allow_prompts: bool,
        /// The server's streamable-HTTP endpoint (`http://127.0.0.1:8000/mcp`) instead of a command; plain
        /// http only, no OAuth.
        #[arg(long)]
        url: Option<String>,
        /// The server's command and its arguments, after `--`.
        #[arg(last = true, required_unless_present = "url", conflicts_with = "url")]
        command: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum AuditCommand {
    /// Verify an audit chain: every event in place, linked to the one before, unchanged since written.
    /// Exit 0 when it verifies, 1 when it does not, 2 when the file or the database cannot be read.
    Verify {
        /// An SQLite store (the runtime's ledger), a JSON-lines export (`Runtime::export_audit`), or a
        /// PostgreSQL ledger as `postgres://…` or libpq's key-value form `host=… dbname=…` (`sslmode`,
        /// `sslrootcert` as the hosts give them; needs the feature `postgres`).
        file: PathBuf,
        /// The head the chain must end at, as `SEQ:HASH` (from `Runtime::audit_head`): a truncated chain
        /// fails.
        #[arg(long)]
        head: Option<String>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum CheckFormat {
    /// Diagnostics for people.
    Human,
    /// One JSON document on stdout.
    Json,
    /// SARIF 2.1.0 on stdout.
    Sarif,
}

/// `permitc mcp proxy --sync` (`permitd serve --sync`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum SyncArg {
    /// A group commit: every commit is synced before it is acknowledged; commits share syncs.
    Group,
    /// SQLite syncs every commit.
    Full,
    /// Synced at checkpoints only.
    Normal,
}

impl From<SyncArg> for permits_runtime::Synchronous {
    fn from(mode: SyncArg) -> Self {
        match mode {
            SyncArg::Group => permits_runtime::Synchronous::Group,
            SyncArg::Full => permits_runtime::Synchronous::Full,
            SyncArg::Normal => permits_runtime::Synchronous::Normal,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum Format {
    /// Diagnostics for people.
    Human,
    /// One JSON document on stdout.
    Json,
}
