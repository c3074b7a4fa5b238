//! Records as the durable stores keep them: JSON text, checked against the row's key when read back
//! (shared by `SqliteStore` and `PostgresStore`, so the two cannot drift).

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::StoreError;
use super::records::{Lease, Proposal, Run, StandingRule, Task};

/// A record with an id, checked against its row's key on decoding.
pub(crate) trait HasId {
    /// The record's key (a task's is its operation key).
    fn id(&self) -> &str;
}

impl HasId for Proposal {
    fn id(&self) -> &str {
        &self.id
    }
}

impl HasId for Run {
    fn id(&self) -> &str {
        &self.id
    }
}

impl HasId for StandingRule {
    fn id(&self) -> &str {
        &self.id
    }
}

impl HasId for Task {
    fn id(&self) -> &str {
        &self.key
    }
}

impl HasId for Lease {
    fn id(&self) -> &str {
        &self.key
    }
}

/// A record read back from its text: corrupt text, or a record whose id is not its row's key, is an error.
pub(crate) fn decode<T: DeserializeOwned + HasId>(kind: &str, id: &str, text: &str) -> Result<T, StoreError> {
    let record: T =
        serde_json::from_str(text).map_err(|e| StoreError(format!("the stored {kind} `{id}` is corrupt: {e}")))?;
    if record.id() != id {
        return Err(StoreError(format!(
            "the stored {kind} `{id}` is corrupt: its record has the id `{}`",
            record.id()
        )));
    }
    Ok(record)
}

/// A record as the text a store keeps.
pub(crate) fn encode<T: Serialize>(kind: &str, id: &str, record: &T) -> Result<String, StoreError> {
    serde_json::to_string(record).map_err(|e| StoreError(format!("cannot encode the {kind} `{id}`: {e}")))
}
