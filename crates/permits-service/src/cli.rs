//! The command line: `permitd serve`, `permitd keys add | list | revoke` and `permitd people set-password`.
//!
//! Exit codes: 0 done, 1 a failure (the table or the store cannot be opened, the address cannot be bound,
//! a key cannot be made), 2 a usage error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::keys::{KeyStore, NewKey};

/// `permitd`: the approval service.
#[derive(Debug, Parser)]
#[command(name = "permitd", version, about = "The permits approval service: the runtime behind an HTTP API")]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// A subcommand.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API on the table and the store until SIGTERM or Ctrl-C (SIGHUP reloads the table).
    Serve(Box<ServeArgs>),
    /// Make, list and revoke API keys.
    Keys {
        /// What to do with keys.
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Persons of the inbox: their passwords.
    People {
        /// What to do.
        #[command(subcommand)]
        command: PeopleCommand,
    },
}

/// `permitd people …`.
#[derive(Debug, Subcommand)]
pub enum PeopleCommand {
    /// Set (or replace) a person's inbox password, read from the first line of stdin (never from the
    /// command line, where other users and the shell's history would see it); at least 12 characters. Ends
    /// every session of that person.
    SetPassword {
        /// The store the inbox serves.
        #[arg(long)]
        store: PathBuf,
        /// The person, as the table names them (`Noor`).
        person: String,
    },
}

/// `permitd serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The decision table (written by `permitc compile`); SIGHUP reads it again.
    #[arg(long)]
    pub table: PathBuf,
    /// The ledger: an SQLite file (created if missing), or a PostgreSQL database (`postgres://…`, or the
    /// key-value form `host=… dbname=…`; then `--audit FILE` is required) shared by many instances and
    /// hosts: proposals, grants, rules, budgets, runs, and the keys.
    #[arg(long)]
    pub store: PathBuf,
    /// The address to listen on; port 0 takes any free port. The bound address is printed on stdout.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub listen: String,
    /// Trust this public key (64 hex digits, or a `.pub` file from `permitc keygen`); repeatable. Tables
    /// (at startup, on SIGHUP, posted) must then be signed by one of them (`TABLE.sig` beside the file).
    #[arg(long)]
    pub trust: Vec<String>,
    /// When a commit reaches the disk, for an SQLite ledger (in WAL mode; PostgreSQL's own `synchronous_commit`
    /// decides for a PostgreSQL store): `group` (the default) and `full` answer a state change only once the
    /// log is synced to the disk, so no acknowledged change is lost to a power loss or an operating-system
    /// crash — `group` lets the requests that commit while a sync runs share the next one (a group commit),
    /// `full` is SQLite's own sync at every commit; `normal` syncs only at checkpoints: a power loss or an OS
    /// crash may lose the last acknowledged commits (a crash of the service itself, SIGKILL included, loses
    /// nothing either way).
    #[arg(long, value_enum, default_value_t = SyncMode::Group)]
    pub sync: SyncMode,
    /// Also allow version URLs on this host name, as written in the URL (loopback is always allowed);
    /// repeatable. Version URLs are plain `http://`.
    #[arg(long)]
    pub version_url_host: Vec<String>,
    /// How long a version URL has to answer when a person approves, in milliseconds (1 to 10000). When it
    /// does not answer in time, the approval is made against the version the proposal was made with, and
    /// the claim still rechecks it.
    #[arg(long, default_value_t = crate::version_urls::DEFAULT_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(1..=crate::version_urls::MAX_TIMEOUT_MS))]
    pub version_url_timeout_ms: u64,
    /// The audit log, JSON lines (default: the store's path with `.audit.jsonl` appended; required with a
    /// PostgreSQL store).
    #[arg(long)]
    pub audit: Option<PathBuf>,
    /// Also stop when standard input closes: the lifeline of a supervisor that holds its other end
    /// (`permitc mcp proxy --store`), so that the service ends with the supervisor however it ends, killed
    /// included.
    #[arg(long)]
    pub until_stdin_closes: bool,
    /// A host key (`K-3`) to revoke once the service has stopped: the key a supervisor minted for its run.
    #[arg(long, value_name = "KEY_ID")]
    pub revoke_on_exit: Option<String>,
    /// The inbox: a session older than this many seconds must sign in again before it approves (or makes a
    /// rule); 0 asks for a password at every approval.
    #[arg(long, default_value_t = crate::inbox::DEFAULT_FRESH_SIGN_IN)]
    pub fresh_sign_in: u64,
    /// The inbox: a second factor is mandatory: a person without TOTP who signs in with a password can only
    /// add one (on `/inbox/totp`) — no inbox, no decision — until they do; then sign-in asks for its code.
    #[arg(long)]
    pub require_totp: bool,
    /// The inbox: mark its cookies `Secure`, so a browser sends them over HTTPS only. Set it when persons
    /// reach the service through a TLS proxy; with `--tls-cert` they are `Secure` anyway.
    #[arg(long)]
    pub secure_cookies: bool,
    /// Serve HTTPS (TLS 1.2 and 1.3, rustls with ring) with this certificate chain (PEM, the server's
    /// certificate first); needs `--tls-key`. The inbox's cookies are then `Secure`. Without it `permitd`
    /// serves plain HTTP.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// The inbox's single sign-on through a reverse proxy (off by default): the proxy names the signed-in
    /// person in this header (`X-Forwarded-User`). Needs `--trusted-header-secret-file`: a request naming a
    /// person without the proxy's secret in `X-Permits-Proxy-Secret` is refused (401). With it the inbox
    /// has no password sign-in.
    #[arg(long)]
    pub trusted_header_user: Option<String>,
    /// The secret the proxy sends in `X-Permits-Proxy-Secret` with every request (the file's first line, at
    /// least 32 characters of visible ASCII).
    #[arg(long)]
    pub trusted_header_secret_file: Option<PathBuf>,
    /// Announce each new proposal to a webhook: `person:NAME=URL` (proposals that person decides),
    /// `role:NAME=URL` or `queue:NAME=URL` (proposals routed there); plain `http://`; repeatable. The
    /// body is Slack-compatible JSON with the label, who asks and a link to the inbox, never an argument.
    #[arg(long)]
    pub webhook: Vec<String>,
    /// The inbox's address as persons reach it (for the webhooks' links); default: the bound address.
    #[arg(long)]
    pub public_url: Option<String>,
}

/// `permitd serve --sync`: SQLite's `synchronous` for the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SyncMode {
    /// A group commit (the default): SQLite at `synchronous=NORMAL`, and every commit is acknowledged only
    /// after the store has synced the log since; concurrent commits share a sync.
    Group,
    /// `synchronous=FULL`: SQLite syncs the log at every commit, before it is acknowledged.
    Full,
    /// `synchronous=NORMAL`: the log is synced at checkpoints only.
    Normal,
}

impl From<SyncMode> for permits_runtime::Synchronous {
    fn from(mode: SyncMode) -> Self {
        match mode {
            SyncMode::Group => permits_runtime::Synchronous::Group,
            SyncMode::Full => permits_runtime::Synchronous::Full,
            SyncMode::Normal => permits_runtime::Synchronous::Normal,
        }
    }
}

/// `permitd keys …`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a key; its token is printed once, on stdout.
    Add(AddArgs),
    /// List the keys (never their tokens).
    List {
        /// The store whose keys to list.
        #[arg(long)]
        store: PathBuf,
    },
    /// Revoke a key by its id (`K-1`): it is refused from then on.
    Revoke {
        /// The store whose key to revoke.
        #[arg(long)]
        store: PathBuf,
        /// The key's id.
        id: String,
    },
}

/// `permitd keys add`: exactly one of `--agents`, `--person`, `--admin`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("kind").required(true).args(["agents", "person", "admin"])))]
pub struct AddArgs {
    /// The store to keep the key in.
    #[arg(long)]
    pub store: PathBuf,
    /// A host key for these agents (comma-separated): it never decides for a person.
    #[arg(long, value_delimiter = ',')]
    pub agents: Vec<String>,
    /// A person key: it acts only as this person (approve, reject, revoke, rules, resolve).
    #[arg(long)]
    pub person: Option<String>,
    /// An admin key: it installs tables (`POST /v1/admin/table`).
    #[arg(long)]
    pub admin: bool,
    /// A note shown when the keys are listed.
    #[arg(long)]
    pub label: Option<String>,
}

/// Runs the command line.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    let result = match cli.command {
        Command::Serve(args) => crate::server::serve(&args),
        Command::Keys { command } => keys(command),
        Command::People { command } => people(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            say(&format!("permitd: {message}"));
            ExitCode::FAILURE
        }
    }
}

fn people(command: PeopleCommand) -> Result<(), String> {
    match command {
        PeopleCommand::SetPassword { store, person } => {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map_err(|e| format!("cannot read the password from stdin: {e}"))?;
            let password = line.strip_suffix('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).unwrap_or(&line);
            if password.is_empty() {
                return Err(
                    "give the password on stdin: `printf '%s\\n' \"$PASSWORD\" | permitd people set-password …`".into(),
                );
            }
            let phc = crate::people::hash_password(password)?;
            KeyStore::open(&store)?.set_password(&person, &phc, crate::server::now())?;
            say(&format!("permitd: {person} has a new inbox password (Argon2id); their sessions are ended"));
            Ok(())
        }
    }
}

/// A line on stderr; a closed stderr is ignored (`eprintln!` would panic): [`crate::say!`].
fn say(line: &str) {
    crate::say!("{line}");
}

fn keys(command: KeysCommand) -> Result<(), String> {
    let now = crate::server::now();
    match command {
        KeysCommand::Add(args) => {
            let store = KeyStore::open(&args.store)?;
            let new = match (args.agents.is_empty(), args.person, args.admin) {
                (false, None, false) => NewKey::Host(args.agents),
                (true, Some(person), false) => NewKey::Person(person),
                (true, None, true) => NewKey::Admin,
                _ => return Err("give exactly one of `--agents`, `--person`, `--admin`".into()),
            };
            let (key, token) = store.add(&new, args.label.as_deref(), now)?;
            let mut stdout = std::io::stdout().lock();
            if let Err(e) = writeln!(stdout, "{token}").and_then(|()| stdout.flush()) {
                // The token is shown only now: a key whose token nobody received is revoked at once.
                let revoked = match store.revoke(&key.id, now) {
                    Ok(_) => format!("key {} is revoked, since nobody has its token", key.id),
                    Err(why) => format!("revoke key {}, whose token nobody has ({why})", key.id),
                };
                return Err(format!("cannot write the token to stdout: {e}; {revoked}"));
            }
            drop(stdout);
            let what = match &new {
                NewKey::Host(agents) => format!("a host key for {}", agents.join(", ")),
                NewKey::Person(person) => format!("a person key for {person}"),
                NewKey::Admin => "an admin key".to_string(),
            };
            say(&format!("permitd: key {} is {what}; its token (above) is shown only now", key.id));
            Ok(())
        }
        KeysCommand::List { store } => {
            let mut stdout = std::io::stdout().lock();
            for key in KeyStore::open(&store)?.list()? {
                let line = serde_json::to_string(&key).map_err(|e| e.to_string())?;
                match writeln!(stdout, "{line}") {
                    Ok(()) => {}
                    // The reader has what it wanted (`| head -1`): stop, as a success.
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                    Err(e) => return Err(format!("cannot write the keys to stdout: {e}")),
                }
            }
            match stdout.flush() {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(format!("cannot write the keys to stdout: {e}"))
                }
                _ => Ok(()),
            }
        }
        KeysCommand::Revoke { store, id } => {
            let key = KeyStore::open(&store)?.revoke(&id, now)?;
            say(&format!("permitd: key {} is revoked", key.id));
            Ok(())
        }
    }
}
