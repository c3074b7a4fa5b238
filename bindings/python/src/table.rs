//! `permits.Table`: a loaded, verified decision table and its `LevelIndex`, owned together.
//!
//! `LevelIndex` borrows the table it indexes. The Python object owns both in one [`Indexed`] cell (the
//! `self_cell` crate: the table on the heap, the index borrowing it, freed together), shared by `Arc` with
//! every runtime built on it, so `Runtime.level` never rebuilds the index and never outlives its table.

use std::sync::Arc;

use permits_runtime::decide_table;
use permits_runtime::table::{CallRef, Level, LevelIndex, Table};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};
use serde_json::Value;

use crate::convert::{Arguments, PathArg, Text, input_error, table_error, type_name};
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
        let call = CallRef { agent, skill, tool, arguments, requester };
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
}

#[pymethods]
impl PyTable {
    /// Loads and verifies the table at `path` (a `str` or `os.PathLike`).
    ///
    /// `trust` (public keys for signed tables) is not in this runtime yet: giving it is refused, so that
    /// code written for signed tables never runs on an unchecked one.
    #[staticmethod]
    #[pyo3(signature = (path, *, trust = None))]
    fn load(py: Python<'_>, path: PathArg, trust: Option<&Bound<'_, PyAny>>) -> PyResult<PyTable> {
        // TODO(runtime hardening): `trust=[public keys]` once the runtime verifies signed tables (spec §5a).
        if trust.is_some() {
            return Err(crate::convert::error(
                py,
                crate::convert::Exc::Table,
                ("unsupported", "signed tables (`trust=`) are not supported by this runtime yet: nothing was loaded"),
            ));
        }
        let loaded = py.detach(|| Table::load_path(&path.0));
        match loaded {
            Ok(table) => Ok(PyTable { indexed: py.detach(|| Indexed::of(table)) }),
            Err(e) => Err(table_error(py, &e)),
        }
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
            Ok(table) => Ok(PyTable { indexed: py.detach(|| Indexed::of(table)) }),
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
        };
        Decision(decide_table(self.indexed.table(), &call))
    }

    fn __repr__(&self) -> String {
        let t = self.indexed.table();
        format!("Table({} agents, {} tools, digest {})", t.agents.len(), t.tools.len(), &t.header.table_digest)
    }
}
