//! Loading and verifying a table (spec §5 "Load"): the format, unknown fields, the digest.

use crate::{Entry, FORMAT, Table, canonical, sha256_hex};
use std::path::Path;

/// Errors of [`Table::load`] and [`Table::load_path`].
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The table file could not be read.
    #[error("cannot read the table `{path}`: {source}")]
    Io {
        /// The path given.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The bytes are not a table: bad JSON, a missing or unknown field, a wrong type.
    #[error("the table is malformed: {0}")]
    Malformed(String),
    /// `header.format` is not [`FORMAT`].
    #[error("the table has format {found}, this runtime reads format {expected}")]
    UnknownFormat {
        /// The format in the header.
        found: u64,
        /// [`FORMAT`].
        expected: u32,
    },
    /// The content does not match `header.table_digest`: the table was edited after compiling.
    #[error(
        "the table's digest does not match its content (stated {stated}, computed {computed}): it was changed after compiling"
    )]
    DigestMismatch {
        /// The digest in the header.
        stated: String,
        /// The digest of the content.
        computed: String,
    },
}

impl Table {
    /// Loads and verifies a table from bytes: the format must be [`FORMAT`], every field known, and the
    /// content must hash to `header.table_digest`.
    ///
    /// Errors: [`LoadError::Malformed`], [`LoadError::UnknownFormat`], [`LoadError::DigestMismatch`].
    pub fn load(bytes: &[u8]) -> Result<Table, LoadError> {
        // The common case, a well-formed table: straight from the bytes to the struct, no `Value` tree.
        // Anything it refuses (or a table of another format) goes through the path below, which gives the
        // errors their exact wording (`from_slice`'s would add a line and column) and refuses a table of
        // another format as such rather than as malformed.
        // The UTF-8 check is made once for the whole text (word at a time while it is ASCII), so that
        // `from_str` need not validate each string again.
        let parsed = std::str::from_utf8(bytes).ok().and_then(|text| serde_json::from_str::<Table>(text).ok());
        if let Some(table) = parsed {
            if table.header.format == FORMAT {
                let computed = table.compute_digest();
                if computed != table.header.table_digest {
                    return Err(LoadError::DigestMismatch { stated: table.header.table_digest.clone(), computed });
                }
                return Ok(table);
            }
        }
        Table::load_slow(bytes)
    }

    /// [`Table::load`] through a `serde_json::Value`: looks at the format first.
    fn load_slow(bytes: &[u8]) -> Result<Table, LoadError> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| LoadError::Malformed(e.to_string()))?;
        let format = value.get("header").and_then(|h| h.get("format"));
        match format.and_then(serde_json::Value::as_u64) {
            Some(f) if f == u64::from(FORMAT) => {}
            Some(found) => return Err(LoadError::UnknownFormat { found, expected: FORMAT }),
            None => return Err(LoadError::Malformed("`header.format` is missing or not a number".into())),
        }
        let table: Table = serde_json::from_value(value).map_err(|e| LoadError::Malformed(e.to_string()))?;
        let computed = table.compute_digest();
        if computed != table.header.table_digest {
            return Err(LoadError::DigestMismatch { stated: table.header.table_digest.clone(), computed });
        }
        Ok(table)
    }

    /// Reads a table file and loads it with [`Table::load`].
    ///
    /// Errors: [`LoadError::Io`] and those of [`Table::load`].
    pub fn load_path(path: &Path) -> Result<Table, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io { path: path.display().to_string(), source })?;
        Table::load(&bytes)
    }

    /// SHA-256 (hex) of the canonical JSON of everything but the header.
    pub fn compute_digest(&self) -> String {
        // The canonical form is written straight from the struct (no `Value` tree), leaving out `header`.
        // INVARIANT: the table's types serialize with string map keys only; a fallback here would be a
        // well-formed wrong digest.
        let bytes = canonical::to_canonical_bytes(self, None, Some("header")).expect("a table serializes");
        sha256_hex(&bytes)
    }

    /// Sets `header.table_digest` to the digest of the current content.
    pub fn seal(&mut self) {
        self.header.table_digest = self.compute_digest();
    }

    /// The table as written by `permitc compile`: JSON with sorted keys, two-space indentation and a final
    /// newline. The same table always gives the same bytes.
    pub fn to_pretty_json(&self) -> String {
        // INVARIANT: the table's types serialize with string map keys only.
        let mut bytes = canonical::to_canonical_bytes(self, Some(2), None).expect("a table serializes");
        bytes.push(b'\n');
        // INVARIANT: the writer writes only `str`s and ASCII punctuation, so the bytes are UTF-8.
        String::from_utf8(bytes).expect("canonical JSON is UTF-8")
    }

    /// The entry for a triple, if it is offered.
    pub fn entry(&self, agent: &str, skill: &str, tool: &str) -> Option<&Entry> {
        self.entries.get(agent)?.get(skill)?.get(tool)
    }
}
