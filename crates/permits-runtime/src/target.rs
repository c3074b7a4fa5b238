//! Where a store string points (spec §5a "one chain per store", §6 "the ledger is durable"): a PostgreSQL
//! database or a file. Pure string work, in every build: a runtime built without the feature `postgres` still
//! tells a PostgreSQL connection string from a file path, so a door that cannot open one says so instead of
//! looking for a file of that name.

/// The connection keywords of libpq (PostgreSQL 17's list, `libpq-connect`): a store string whose first
/// word is one of them followed by `=` is a key-value connection string ([`is_postgres_target`]).
const CONNINFO_KEYWORDS: &[&str] = &[
    "application_name",
    "channel_binding",
    "client_encoding",
    "connect_timeout",
    "dbname",
    "fallback_application_name",
    "gssdelegation",
    "gssencmode",
    "gsslib",
    "host",
    "hostaddr",
    "keepalives",
    "keepalives_count",
    "keepalives_idle",
    "keepalives_interval",
    "krbsrvname",
    "load_balance_hosts",
    "options",
    "passfile",
    "password",
    "port",
    "replication",
    "require_auth",
    "requirepeer",
    "requiressl",
    "service",
    "ssl_max_protocol_version",
    "ssl_min_protocol_version",
    "sslcert",
    "sslcertmode",
    "sslcompression",
    "sslcrl",
    "sslcrldir",
    "sslkey",
    "sslmode",
    "sslnegotiation",
    "sslpassword",
    "sslrootcert",
    "sslsni",
    "target_session_attrs",
    "tcp_user_timeout",
    "user",
];

/// Whether a store string names a PostgreSQL database rather than a file (spec §5a, §6). Its shapes:
///
/// - a URL starting `postgres://` or `postgresql://` (`postgres://permits@db.internal/permits?sslmode=require`);
/// - libpq's key-value form, whose first word is a connection keyword followed by `=`
///   (`host=db.internal dbname=permits sslmode=require …`, `dbname = permits`, `host=/tmp dbname=x user=y`).
///
/// Anything else is a file path (`ledger.db`, `/var/lib/permits/ledger.db`, `hostname=x`); a file whose name
/// looks like a connection string is named with a folder (`./host=x.db`). Every door that takes a store
/// (`permitd serve`, `permitd keys` and `permitd people`, `permitc audit verify`, Python's
/// `permits.Runtime`) decides with this function; with the feature `postgres`, `PostgresTarget::is_postgres`
/// is the same function.
pub fn is_postgres_target(store: &str) -> bool {
    if store.starts_with("postgres://") || store.starts_with("postgresql://") {
        return true;
    }
    let text = store.trim_start();
    let word_end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(text.len());
    let (word, rest) = text.split_at(word_end);
    rest.trim_start().starts_with('=') && CONNINFO_KEYWORDS.binary_search(&word).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_key_value_strings_are_postgres_and_the_rest_are_files() {
        assert!(CONNINFO_KEYWORDS.windows(2).all(|w| w[0] < w[1]), "sorted, for the binary search");
        for store in [
            "postgres://h/db",
            "postgresql://u@h:5432/db?sslmode=require",
            "host=db.internal dbname=permits sslmode=require sslrootcert=/etc/ca.pem",
            "host=127.0.0.1 port=46967 user=permits dbname=x",
            "dbname=permits",
            "  user = permits host=/tmp",
            "hostaddr=10.0.0.1",
            "sslmode=require host=h",
            "application_name=x host=h",
        ] {
            assert!(is_postgres_target(store), "{store}");
        }
        for store in [
            "ledger.db",
            "./host=x.db",
            "/var/lib/permits/ledger.db",
            "hostname=x",
            "hosts.db",
            "postgres:/x",
            "./postgres://x",
            "",
            ":memory:",
            "=host",
            "database=permits",
        ] {
            assert!(!is_postgres_target(store), "{store}");
        }
    }
}
