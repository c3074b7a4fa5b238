//! Where `--store` points (issue #22): an SQLite file, or a PostgreSQL database when the value is a
//! `postgres://` or `postgresql://` URL or libpq's key-value form (`host=db.internal dbname=permits …`), as
//! [`permits_runtime::PostgresTarget::is_postgres`] decides for every door that takes a store. Several `permitd` instances (behind a load balancer) and embedded
//! hosts on other machines share one PostgreSQL database: its transactions are serialized by the runtime's
//! [`permits_runtime::PostgresStore`], and the service's keys live beside its tables (`service_keys`).

use std::path::Path;

/// The two kinds of store `--store` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location<'a> {
    /// An SQLite file (created if missing).
    File(&'a Path),
    /// A PostgreSQL connection string: a URL or the key-value form.
    Postgres(&'a str),
}

/// What `--store` names: a URL starting `postgres://` or `postgresql://`, or a key-value connection string
/// (its first word a libpq keyword and `=`), is a PostgreSQL database; anything else a file
/// ([`permits_runtime::PostgresTarget::is_postgres`]).
pub fn location(store: &Path) -> Location<'_> {
    match store.to_str() {
        Some(url) if permits_runtime::PostgresTarget::is_postgres(url) => Location::Postgres(url),
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
        let conninfo = "host=127.0.0.1 port=46967 user=permits dbname=x";
        assert_eq!(location(Path::new(conninfo)), Location::Postgres(conninfo));
        assert_eq!(location(Path::new("ledger.db")), Location::File(Path::new("ledger.db")));
        assert_eq!(location(Path::new("./host=x.db")), Location::File(Path::new("./host=x.db")));
        assert_eq!(location(Path::new("./postgres:/x")), Location::File(Path::new("./postgres:/x")));
    }
}
