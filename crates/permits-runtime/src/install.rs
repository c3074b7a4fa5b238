//! One current table per store, no silent rollback, signed tables (spec §5a): the store records each
//! installed table's digest and serial, in order; a runtime whose table is not the store's current one
//! changes nothing until it loads the current table or installs a newer one; an older table (a serial at
//! or below the highest installed) is refused unless a supervisor forces it; with trusted keys, only a
//! table signed by one of them is installed. An unsigned table has no serial, so nothing tells an older one
//! from a recompile that gives the same bytes: a host that needs rollback protection signs its tables.
//! Every install and every refusal is an audit event with both digests.

use crate::*;

/// The runtime's table and its signature, swapped together.
pub(crate) struct Current {
    /// The table in force.
    pub(crate) table: Arc<Table>,
    /// Its signature, when it came with one.
    pub(crate) signature: Option<TableSignature>,
}

/// Whether an install may override a rollback refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Force<'a> {
    /// An ordinary install: an older table is refused.
    No,
    /// A supervisor forces it (spec §5a): installed even if older, and audited as forced.
    By(&'a str),
}

impl Runtime {
    /// Swaps in another table (a recompiled policy, already verified by [`Table::load`]) and installs it
    /// as the store's current table (spec §5a). Waiting and granted proposals are re-decided on it when they
    /// are approved or executed: a changed entry makes them `stale`, a `never` makes them final. Giving the
    /// store's current table again just loads it (a runtime that fell behind catches up).
    ///
    /// Errors: [`RuntimeError::Table`] — with trusted keys, [`TableRefusal::Unsigned`]; the refusal is
    /// audited and nothing changes. [`RuntimeError::Store`].
    pub fn replace_table(&self, table: Table) -> Result<(), RuntimeError> {
        self.install(table, None, Force::No)
    }

    /// Installs the runtime's own table (the one it was built with, and its signature) as the store's
    /// current one: what a host restarting with a recompiled policy does before anything else, since a
    /// runtime whose table is not the store's current one changes nothing (spec §5a). Installing the
    /// current table again changes nothing.
    ///
    /// Errors: those of [`Runtime::replace_table_signed`].
    pub fn install_table(&self) -> Result<(), RuntimeError> {
        let (table, signature) = {
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            ((*current.table).clone(), current.signature.clone())
        };
        self.install(table, signature, Force::No)
    }

    /// [`Runtime::replace_table`] with the table's signature (`permitc compile --sign`).
    ///
    /// Errors: [`RuntimeError::Table`] — [`TableRefusal::Rollback`] (its serial is at or below the highest
    /// the store installed), [`TableRefusal::OtherTable`], [`TableRefusal::UntrustedKey`],
    /// [`TableRefusal::BadSignature`]; [`RuntimeError::Store`].
    pub fn replace_table_signed(&self, table: Table, signature: TableSignature) -> Result<(), RuntimeError> {
        self.install(table, Some(signature), Force::No)
    }

    /// A supervisor (of the table in force) installs `table` over a rollback refusal (spec §5a: "unless a
    /// supervisor forces it"); a signature, when the runtime trusts keys, must still verify. Audited as
    /// forced, with both digests.
    ///
    /// Errors: [`RuntimeError::Table`] ([`TableRefusal::NotSupervisor`], and the signature's refusals),
    /// [`RuntimeError::Store`].
    pub fn force_table(&self, table: Table, signature: Option<TableSignature>, by: &str) -> Result<(), RuntimeError> {
        self.install(table, signature, Force::By(by))
    }

    /// Every table installed in the store, oldest first; the last is the current one.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn installed_tables(&self) -> Result<Vec<TableInstall>, RuntimeError> {
        let mut tx = self.store.begin()?;
        Ok(tx.installed_tables()?)
    }

    fn install(&self, table: Table, signature: Option<TableSignature>, force: Force<'_>) -> Result<(), RuntimeError> {
        let now = self.clock.now();
        let old = self.table();
        let mut tx = self.store.begin()?;
        let mut events = Vec::new();
        let result = self.install_in(tx.as_mut(), &mut events, &old, &table, signature.as_ref(), force, now);
        if let Err(RuntimeError::Store(_)) = &result {
            return result;
        }
        let mut head = tx.audit_head()?;
        for event in &events {
            let chained = ChainedEvent::after(head.as_ref(), event.clone());
            tx.append_audit(&chained)?;
            head = Some(chained.head());
        }
        tx.commit()?;
        for event in &events {
            self.audit.record(event);
        }
        result?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = Current { table: Arc::new(table), signature };
        Ok(())
    }

    #[expect(clippy::too_many_arguments, reason = "one private step of `install`, called once")]
    fn install_in(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        old: &Table,
        table: &Table,
        signature: Option<&TableSignature>,
        force: Force<'_>,
        now: u64,
    ) -> Result<(), RuntimeError> {
        let digest = &table.header.table_digest;
        let who = match force {
            Force::By(by) => by,
            Force::No => "",
        };
        let refuse = |events: &mut Vec<AuditEvent>, refusal: TableRefusal| {
            let mut e = self.operation_event(EventKind::Refusal, who, digest);
            e.outcome = "refused".into();
            e.reason =
                Some(format!("table `{digest}` (the table in force is `{}`): {refusal}", old.header.table_digest));
            events.push(e);
            RuntimeError::Table(refusal)
        };
        if !self.trusted.is_empty() {
            if let Err(refusal) = self.trusted.verify(table, signature) {
                return Err(refuse(events, refusal));
            }
        }
        let installs = tx.installed_tables()?;
        let current = installs.last();
        if current.is_some_and(|c| &c.table_digest == digest) {
            // The store's current table: loading it installs nothing new.
            return Ok(());
        }
        if let Force::By(by) = force {
            if !holds(old, by, &old.authority.supervises) {
                return Err(refuse(events, TableRefusal::NotSupervisor { by: by.to_string() }));
            }
        } else if let Some(refusal) = rollback(&installs, table, signature) {
            return Err(refuse(events, refusal));
        }
        let install = TableInstall {
            seq: current.map_or(1, |c| c.seq.saturating_add(1)),
            table_digest: digest.clone(),
            serial: signature.map(|s| s.serial),
            key: signature.map(|s| s.key.clone()),
            installed_at: now,
            forced_by: match force {
                Force::By(by) => Some(by.to_string()),
                Force::No => None,
            },
        };
        tx.put_installed_table(&install)?;
        events.push(self.install_event(&install, current.map(|c| c.table_digest.as_str())));
        Ok(())
    }

    /// Spec §5a, before every transaction: the runtime's table must be the store's current one; on an
    /// empty store the runtime's table is installed (checked against the trusted keys first).
    pub(crate) fn ensure_current(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
    ) -> Result<(), RuntimeError> {
        let (table, signature) = {
            let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
            (current.table.clone(), current.signature.clone())
        };
        let digest = &table.header.table_digest;
        match tx.current_table()? {
            Some(c) if &c.table_digest == digest => Ok(()),
            Some(c) => {
                let refusal = TableRefusal::NotCurrent { runtime: digest.clone(), store: c.table_digest.clone() };
                let mut e = self.operation_event(EventKind::Refusal, "", digest);
                e.outcome = "refused".into();
                e.reason = Some(refusal.to_string());
                events.push(e);
                Err(RuntimeError::Table(refusal))
            }
            None => {
                if !self.trusted.is_empty() {
                    if let Err(refusal) = self.trusted.verify(&table, signature.as_ref()) {
                        let mut e = self.operation_event(EventKind::Refusal, "", digest);
                        e.outcome = "refused".into();
                        e.reason = Some(refusal.to_string());
                        events.push(e);
                        return Err(RuntimeError::Table(refusal));
                    }
                }
                let install = TableInstall {
                    seq: 1,
                    table_digest: digest.clone(),
                    serial: signature.as_ref().map(|s| s.serial),
                    key: signature.as_ref().map(|s| s.key.clone()),
                    installed_at: self.clock.now(),
                    forced_by: None,
                };
                tx.put_installed_table(&install)?;
                events.push(self.install_event(&install, None));
                Ok(())
            }
        }
    }

    fn install_event(&self, install: &TableInstall, replaces: Option<&str>) -> AuditEvent {
        let mut e = self.operation_event(
            EventKind::TableInstalled,
            install.forced_by.as_deref().unwrap_or(""),
            &install.table_digest,
        );
        e.outcome = if install.forced_by.is_some() { "forced".into() } else { "installed".into() };
        let serial = install.serial.map_or("unsigned".to_string(), |s| format!("serial {s}"));
        e.reason = Some(match replaces {
            Some(old) => format!("table `{}` ({serial}) replaces `{old}`", install.table_digest),
            None => format!("table `{}` ({serial}) is the store's first", install.table_digest),
        });
        e
    }
}

/// Why installing `table` would be a rollback, if it would: its signature's serial is at or below the
/// highest the store installed. An unsigned table carries no order (a recompile may well give the bytes of
/// an earlier release, as lowering an allowance back does), so rollback protection needs signed tables.
fn rollback(installs: &[TableInstall], table: &Table, signature: Option<&TableSignature>) -> Option<TableRefusal> {
    let sig = signature?;
    let highest = installs.iter().filter_map(|i| i.serial).max()?;
    (sig.serial <= highest).then(|| TableRefusal::Rollback {
        digest: table.header.table_digest.clone(),
        serial: sig.serial,
        highest,
    })
}
