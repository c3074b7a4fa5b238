//! `permits.Table`: a loaded, verified decision table and its `LevelIndex`, owned together.
//!
//! `LevelIndex` borrows the table it indexes. The Python object owns both in one [`Indexed`] cell (the
//! `self_cell` crate: the table on the heap, the index borrowing it, freed together), shared by `Arc` with
//! every runtime built on it, so `Runtime.level` never rebuilds the index and never outlives its table. A
//! table loaded with `trust=` carries its verified signature and the trusted keys to the runtime.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use permits_runtime::signing::SIGNATURE_SUFFIX;
use permits_runtime::table::{CallRef, Level, LevelIndex, Table};
use permits_runtime::{TableRefusal, TableSignature, TrustedKeys, decide_table};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};
use serde_json::Value;

use crate::convert::{
    Arguments, Exc, PathArg, Text, dict_of, error, input_error, table_error, table_refusal_kind, type_name,
};
use crate::results::Decision;

self_cell::self_cell!(
    /// A table with its level index, which borrows it.
    pub struct Indexed {
        owner: Table,
        #[covariant]
        dependent: LevelIndex,
    }
);

impl Indexed {
    /// Indexes `table`.
    pub fn of(table: Table) -> Arc<Indexed> {
        Arc::new(Indexed::new(table, |t| LevelIndex::new(t)))
    }

    /// The table.
    pub fn table(&self) -> &Table {
        self.borrow_owner()
    }

    /// The level of one call through the index (the runtime's table decision, without standing rules):
    /// `never` for a refused call.
    pub fn level(&self, agent: &str, skill: &str, tool: &str, arguments: &Value, requester: Option<&str>) -> Level {
        let call = CallRef { agent, skill, tool, arguments, requester, mode: None, via: &[] };
        self.borrow_dependent().level_of(call).map_or(Level::Never, |l| l.level)
    }
}

/// The empty arguments, `{}`, for a call given none.
pub fn no_arguments() -> Value {
    Value::Object(serde_json::Map::new())
}

/// The level as the interned Python string (no allocation per call).
pub fn level_str(py: Python<'_>, level: Level) -> Bound<'_, PyString> {
    match level {
        Level::Alone => pyo3::intern!(py, "alone").clone(),
        Level::Propose => pyo3::intern!(py, "propose").clone(),
        Level::ProposeEveryTime => pyo3::intern!(py, "propose_every_time").clone(),
        Level::Never => pyo3::intern!(py, "never").clone(),
    }
}

/// A decision table that `permitc compile` wrote, loaded and verified (its format, every field known, its
/// digest): the runtime's only input.
#[pyclass(frozen, module = "permits", name = "Table")]
pub struct PyTable {
    /// The table and its index.
    pub indexed: Arc<Indexed>,
    /// Its verified signature and the keys that were trusted to verify it (`Table.load(trust=…)`).
    pub signed: Option<Arc<Signed>>,
}

/// A table's verified signature, and the keys it was verified with: a runtime built on the table trusts
/// them.
#[derive(Debug)]
pub struct Signed {
    /// The signature (`PATH.sig`).
    pub signature: TableSignature,
    /// The keys `trust=` named.
    pub trusted: TrustedKeys,
}

/// `trust=`: a non-empty list or tuple of public keys in hex (an empty one would trust nothing and check
/// nothing, so it is refused).
fn trusted_keys(py: Python<'_>, trust: &Bound<'_, PyAny>) -> PyResult<TrustedKeys> {
    let items: Vec<Bound<'_, PyAny>> = if let Ok(l) = trust.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = trust.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        return Err(input_error(
            py,
            format!(
                "trust is a list of public keys (hex, as in `permitc keygen`'s KEY.pub), not `{}`",
                type_name(trust)
            ),
        ));
    };
    if items.is_empty() {
        return Err(input_error(py, "trust=[] trusts no key and would check nothing: name at least one public key"));
    }
    let mut keys = Vec::with_capacity(items.len());
    for item in &items {
        let Text(key) = item.extract()?;
        keys.push(key);
    }
    TrustedKeys::from_hex(keys.iter().map(String::as_str)).map_err(|e| input_error(py, format!("trust: {e}")))
}

/// The signature beside the table at `path` (`PATH.sig`): `unsigned` when there is none.
fn read_signature(py: Python<'_>, path: &Path, table: &Table) -> PyResult<TableSignature> {
    let mut name = path.as_os_str().to_owned();
    name.push(SIGNATURE_SUFFIX);
    let sig_path = PathBuf::from(name);
    let text = match py.detach(|| std::fs::read_to_string(&sig_path)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let refusal = TableRefusal::Unsigned { digest: table.header.table_digest.clone() };
            return Err(error(
                py,
                Exc::Table,
                ("unsigned", format!("`{}`: {refusal} (no `{}` beside it)", path.display(), sig_path.display())),
            ));
        }
        Err(e) => return Err(error(py, Exc::Table, ("io", format!("cannot read `{}`: {e}", sig_path.display())))),
    };
    serde_json::from_str(&text).map_err(|e| {
        error(py, Exc::Table, ("bad_signature", format!("`{}` is not a table signature: {e}", sig_path.display())))
    })
}

#[pymethods]
impl PyTable {
    /// Loads and verifies the table at `path` (a `str` or `os.PathLike`).
    ///
    /// `trust`: the public keys (hex, as `permitc keygen` writes them in `KEY.pub`) of whoever signs the
    /// policy's releases. With them, the table must come with its signature beside it (`PATH.sig`, written
    /// by `permitc compile --sign`) that names this table and verifies under one of the keys; a runtime built
    /// on it trusts these keys from then on (it installs only tables signed by one of them, and refuses an
    /// older serial: a rollback). Without `trust`, the table's signature is not read.
    #[staticmethod]
    #[pyo3(signature = (path, *, trust = None))]
    fn load(py: Python<'_>, path: PathArg, trust: Option<&Bound<'_, PyAny>>) -> PyResult<PyTable> {
        let trusted = trust.map(|t| trusted_keys(py, t)).transpose()?;
        let loaded = py.detach(|| Table::load_path(&path.0));
        let table = loaded.map_err(|e| table_error(py, &e))?;
        let signed = match trusted {
            None => None,
            Some(trusted) => {
                let signature = read_signature(py, &path.0, &table)?;
                trusted.verify(&table, Some(&signature)).map_err(|r| {
                    error(py, Exc::Table, (table_refusal_kind(&r), format!("`{}`: {r}", path.0.display())))
                })?;
                Some(Arc::new(Signed { signature, trusted }))
            }
        };
        Ok(PyTable { indexed: py.detach(|| Indexed::of(table)), signed })
    }

    /// The signature the table was loaded with (`trust=`): `{"table_digest", "serial", "key",
    /// "signature"}`; `None` for a table loaded without `trust`.
    #[getter]
    fn signature<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.signed.as_ref().map(|s| dict_of(py, &s.signature)).transpose()
    }

    /// Loads and verifies a table from its JSON text (`str` or `bytes`).
    #[staticmethod]
    fn from_json(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<PyTable> {
        let bytes: Vec<u8> = if let Ok(s) = data.cast::<PyString>() {
            s.to_str()?.as_bytes().to_vec()
        } else if let Ok(b) = data.cast::<PyBytes>() {
            b.as_bytes().to_vec()
        } else {
            return Err(input_error(py, format!("a table's JSON is a str or bytes, not `{}`", type_name(data))));
        };
        match py.detach(|| Table::load(&bytes)) {
            Ok(table) => Ok(PyTable { indexed: py.detach(|| Indexed::of(table)), signed: None }),
            Err(e) => Err(table_error(py, &e)),
        }
    }

    /// The table as its pretty JSON (what `permitc compile` writes).
    fn to_json(&self, py: Python<'_>) -> String {
        let indexed = self.indexed.clone();
        py.detach(move || indexed.table().to_pretty_json())
    }

    /// SHA-256 of the canonical JSON of everything but the header.
    #[getter]
    fn table_digest(&self) -> String {
        self.indexed.table().header.table_digest.clone()
    }

    /// SHA-256 of the sources it was compiled from.
    #[getter]
    fn source_digest(&self) -> String {
        self.indexed.table().header.source_digest.clone()
    }

    /// The compiler that wrote it (`permitc 0.1.0`).
    #[getter]
    fn compiler(&self) -> String {
        self.indexed.table().header.compiler.clone()
    }

    /// Every agent's name.
    fn agents(&self) -> Vec<String> {
        self.indexed.table().agents.keys().cloned().collect()
    }

    /// Every skill's name, or the skills of `agent` in its declared order.
    #[pyo3(signature = (agent = None))]
    fn skills(&self, agent: Option<Text>) -> Vec<String> {
        let table = self.indexed.table();
        match agent {
            Some(a) => table.agents.get(&a.0).map(|a| a.skills.clone()).unwrap_or_default(),
            None => table.skills.keys().cloned().collect(),
        }
    }

    /// Every tool's name, or the tools of `skill` in its declared order.
    #[pyo3(signature = (skill = None))]
    fn tools(&self, skill: Option<Text>) -> Vec<String> {
        let table = self.indexed.table();
        match skill {
            Some(s) => table.skills.get(&s.0).map(|s| s.tools.clone()).unwrap_or_default(),
            None => table.tools.keys().cloned().collect(),
        }
    }

    /// Every person's name.
    fn persons(&self) -> Vec<String> {
        self.indexed.table().persons.keys().cloned().collect()
    }

    /// Every budget's name.
    fn budgets(&self) -> Vec<String> {
        self.indexed.table().budgets.keys().cloned().collect()
    }

    /// The table's level of one call (no standing rules: those live in a runtime's store), through the
    /// index: `alone`, `propose`, `propose_every_time` or `never`.
    #[pyo3(signature = (agent, skill, tool, arguments = None, *, requester = None))]
    fn level<'py>(
        &self,
        py: Python<'py>,
        agent: Text,
        skill: Text,
        tool: Text,
        arguments: Option<Arguments>,
        requester: Option<Text>,
    ) -> Bound<'py, PyString> {
        let arguments = arguments.map_or_else(no_arguments, |a| a.0);
        let level =
            self.indexed.level(&agent.0, &skill.0, &tool.0, &arguments, requester.as_ref().map(|r| r.0.as_str()));
        level_str(py, level)
    }

    /// The table's decision for one call, with its reasons (what `permitc decide` prints; no standing
    /// rules).
    #[pyo3(signature = (agent, skill, tool, arguments = None, *, requester = None))]
    fn decide(
        &self,
        agent: Text,
        skill: Text,
        tool: Text,
        arguments: Option<Arguments>,
        requester: Option<Text>,
    ) -> Decision {
        let call = permits_runtime::Call {
            agent: agent.0,
            skill: skill.0,
            tool: tool.0,
            arguments: arguments.map_or_else(no_arguments, |a| a.0),
            requester: requester.map(|r| r.0),
            operation_key: None,
            mode: None,
            via: Vec::new(),
        };
        Decision(decide_table(self.indexed.table(), &call))
    }

    fn __repr__(&self) -> String {
        let t = self.indexed.table();
        format!("Table({} agents, {} tools, digest {})", t.agents.len(), t.tools.len(), &t.header.table_digest)
    }
}
