//! What a request states in place of a host's callbacks (spec §2 `version P.F`, §5 "Display"): the
//! service cannot call a host, so a host states the covered version with its call and its claim, and how
//! each argument reads to a person ("Ticket T-7") with its call; the runtime's [`Versions`] and [`Naming`]
//! callbacks answer what the request stated (an argument stated nothing for reads as [`PlainNaming`] shows
//! it).
//!
//! The runtime asks its callback synchronously, on the thread that runs the operation; every operation of
//! the service runs on one thread of the blocking pool, so the stated version is kept for that thread for
//! the operation's length ([`stating`]) and cleared after it, panics included. A request that states none
//! answers `None`, and the runtime refuses a versioned tool (`unknown_version`), as an embedded host with
//! [`permits_runtime::NoVersions`] would.
//!
//! An approval comes from a person, who cannot know the subject's version: the service states the version
//! the host's version URL answers for the tool ([`crate::version_urls`]), or, without one or without an
//! answer, the versions the proposal was made with (covered and instruction versions), so the approval
//! rechecks the table and the destination, and a changed subject is caught at the approval or at the claim
//! (`stale`), before anything runs.

use std::cell::RefCell;
use std::collections::BTreeMap;

use permits_runtime::table::ParamInfo;
use permits_runtime::{Naming, PlainNaming, VersionQuery, Versions};
use serde_json::Value;

/// What one request states.
#[derive(Clone, Debug, Default)]
pub(crate) struct Statement {
    /// The covered version now.
    pub(crate) version: Option<String>,
    /// How arguments read to a person, by parameter name.
    pub(crate) shown: BTreeMap<String, String>,
    /// The version of the instructions the agent works under now (its prompt set), if the host gives one.
    pub(crate) instruction_version: Option<String>,
}

impl Statement {
    /// A statement of the covered version alone.
    pub(crate) fn version(version: Option<String>, instruction_version: Option<String>) -> Statement {
        Statement { version, shown: BTreeMap::new(), instruction_version }
    }
}

thread_local! {
    static STATED: RefCell<Statement> = RefCell::new(Statement::default());
}

/// The runtime's [`Versions`] and [`Naming`] callbacks in the service: what the current request stated.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stated;

impl Versions for Stated {
    fn covered_version(&self, _: VersionQuery<'_>) -> Option<String> {
        STATED.with(|s| s.borrow().version.clone())
    }

    fn instruction_version(&self, _: &str) -> Option<String> {
        STATED.with(|s| s.borrow().instruction_version.clone())
    }
}

impl Naming for Stated {
    fn show(&self, tool: &str, param: &ParamInfo, value: &Value) -> String {
        STATED
            .with(|s| s.borrow().shown.get(&param.name).cloned())
            .unwrap_or_else(|| PlainNaming.show(tool, param, value))
    }
}

/// Runs `f` with `statement` stated on this thread, then states nothing again.
pub(crate) fn stating<R>(statement: Statement, f: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            STATED.with(|s| *s.borrow_mut() = Statement::default());
        }
    }
    STATED.with(|s| *s.borrow_mut() = statement);
    let _clear = Clear;
    f()
}
