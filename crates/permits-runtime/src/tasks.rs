//! Tasks (spec §5a "Tasks"): the first call under an operation key binds it to its root agent and skill,
//! the person the work is for and the mode; every later call under the key must match, or it is `never`.
//! So one person's proposal never meets another's, and a supersession never releases another person's
//! reservation.

use crate::*;

/// Whether a task check may bind a key that has no task yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Binding {
    /// A call that acts (proposes or runs): the first one binds the task.
    Bind,
    /// A question (decide): checks a binding, makes none.
    CheckOnly,
}

impl Runtime {
    /// The task bound to an operation key, if any.
    ///
    /// Errors: [`RuntimeError::Store`].
    pub fn task(&self, key: &str) -> Result<Option<Task>, RuntimeError> {
        self.transact(|tx, _| Ok(tx.task(key)?))
    }

    /// Ends a task (spec §5a `end_task`): its task rules end; the key keeps its binding, so a later call
    /// under it must still be the same root, person and mode. Ending an ended task changes nothing.
    ///
    /// Errors: [`RuntimeError::UnknownTask`] (no call ever bound the key), [`RuntimeError::Store`].
    pub fn end_task(&self, key: &str) -> Result<Task, RuntimeError> {
        let now = self.clock.now();
        self.transact(|tx, events| {
            let Some(mut task) = tx.task(key)? else { return Err(RuntimeError::UnknownTask(key.to_string())) };
            if task.ended_at.is_none() {
                task.ended_at = Some(now);
                tx.put_task(&task)?;
                // Its task rules end with it (spec §5a "Task-scoped approval").
                for mut rule in tx.rules()? {
                    if rule.task.as_deref() == Some(key) && rule.expires_at.is_none_or(|at| at > now) {
                        rule.expires_at = Some(now);
                        tx.put_rule(&rule)?;
                    }
                }
                events.push(self.task_event(&task));
            }
            Ok(task)
        })
    }

    /// Checks `call` against the task bound to `key` (and binds it first, with [`Binding::Bind`]). Returns
    /// why the call is not this task's, if it is not: "not this task's person (…)", "… root (…)", "… mode".
    pub(crate) fn check_task(
        &self,
        tx: &mut dyn Transaction,
        events: &mut Vec<AuditEvent>,
        key: &str,
        call: &Call,
        binding: Binding,
    ) -> Result<Option<String>, StoreError> {
        let Some(task) = tx.task(key)? else {
            if binding == Binding::Bind {
                let task = Task {
                    key: key.to_string(),
                    root_agent: call.root().0.to_string(),
                    root_skill: call.root().1.to_string(),
                    person: call.requester.clone(),
                    mode: call.mode.clone(),
                    bound_at: self.clock.now(),
                    ended_at: None,
                };
                tx.put_task(&task)?;
                events.push(self.task_event(&task));
            }
            return Ok(None);
        };
        let person = |p: &Option<String>| p.as_ref().map_or("nobody's".to_string(), |p| format!("`{p}`'s"));
        if task.person != call.requester {
            return Ok(Some(format!(
                "not this task's person (`{key}` is {} work, not {})",
                person(&task.person),
                person(&call.requester)
            )));
        }
        if (task.root_agent.as_str(), task.root_skill.as_str()) != call.root() {
            return Ok(Some(format!(
                "not this task's root (`{key}` is the work of `{}` in `{}`)",
                task.root_agent, task.root_skill
            )));
        }
        if task.mode != call.mode {
            let mode = |m: &Option<String>| m.as_ref().map_or("no mode".to_string(), |m| format!("mode `{m}`"));
            return Ok(Some(format!(
                "not this task's mode (`{key}` runs in {}, not {})",
                mode(&task.mode),
                mode(&call.mode)
            )));
        }
        Ok(None)
    }
}

/// Makes `decision` `never` because the call is not its task's (spec §5a): the level, and why.
pub(crate) fn not_this_task(decision: &mut Decision, why: String) {
    decision.level = Level::Never;
    decision.standing_rule = None;
    decision.task_rule = false;
    decision.refusal = Some(why);
}
