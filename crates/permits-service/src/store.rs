//! Where `--store` points (issue #22): an SQLite file, or a PostgreSQL database when the value is a
//! `postgres://` or `postgresql://` URL. Several `permitd` instances (behind a load balancer) and embedded
//! hosts on other machines share one PostgreSQL database: its transactions are serialized by the runtime's
//! [`permits_runtime::PostgresStore`], and the service's keys live beside its tables (`service_keys`).

use std::path::Path;

/// The two kinds of store `--store` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location<'a> {
    /// An SQLite file (created if missing).
    File(&'a Path),
    /// A PostgreSQL connection URL.
    Postgres(&'a str),
}

/// What `--store` names: a URL starting `postgres://` or `postgresql://` is a PostgreSQL database,
/// anything else a file.
pub fn location(store: &Path) -> Location<'_> {
    match store.to_str() {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => Location::Postgres(url),
        _ => Location::File(store),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_postgres_and_the_rest_are_files() {
        assert_eq!(location(Path::new("postgres://h/db")), Location::Postgres("postgres://h/db"));
        assert_eq!(location(Path::new("postgresql://h/db")), Location::Postgres("postgresql://h/db"));
        assert_eq!(location(Path::new("ledger.db")), Location::File(Path::new("ledger.db")));
        assert_eq!(location(Path::new("./postgres:/x")), Location::File(Path::new("./postgres:/x")));
    }
}
