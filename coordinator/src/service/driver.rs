//! The driver: the one place where the scheduler's actions are applied to the coordinator.
//! Every event goes through [`CoordinatorService::drive`], which hands it to the pure
//! [`Scheduler`], journals the slices it finished (durably, before anything else is done or
//! answered), and applies the rest: counters, table states, job progress and logs. What answers
//! the event (a registration, a lease, a completion's acceptance...) comes back in an
//! [`Outcome`] for the gRPC handler to turn into its reply.

use super::*;

/// What an event came to, once [`CoordinatorService::drive`] has applied its actions.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// The actions that answer the event, in the scheduler's order: `JobAccepted` or
    /// `JobRejected`, `Registered`, `Lease` or `NoTask`, `LeaseStatus`, `Accepted` or
    /// `Rejected`, `RepairQueued`.
    pub(super) answers: Vec<Action>,
    /// The event finished the last slice of a job.
    pub(super) job_done: bool,
    /// Materials whose tables are now to be written: their state is `Writing`, the caller
    /// writes them (outside the lock).
    pub(super) writes: Vec<Material>,
}

impl CoordinatorService {
    /// Hands `event` to the scheduler and applies what it answers. Fails only when the
    /// finished slices cannot be journaled (the journal is then broken: completions are
    /// refused until a restart replays it), or for a completion while it is broken.
    pub(super) fn drive(&self, state: &mut State, event: Event) -> Result<Outcome, ServiceError> {
        if matches!(event, Event::TaskCompleted { .. }) {
            if let Some(reason) = &state.journal_broken {
                return Err(ServiceError::JournalBroken(reason.clone()));
            }
        }
        let actions = state.scheduler.handle(self.now(), event);
        let records: Vec<Record> = actions
            .iter()
            .filter_map(|a| match a {
                Action::SliceFinished(r) => Some(Record::SliceFinished(*r)),
                _ => None,
            })
            .collect();
        let c = &self.shared.counters;
        if !records.is_empty() {
            if let Err(e) = state.journal.append(&records) {
                // The scheduler counts these slices finished, but they are not durable: accept
                // nothing more until a restart replays the journal.
                state.journal_broken = Some(e.to_string());
                return Err(e.into());
            }
            Counters::add(&c.journal_records, records.len() as u64);
        }
        let mut out = Outcome::default();
        for a in actions {
            match a {
                Action::SliceFinished(r) => {
                    Counters::add(&c.slices_solved, 1);
                    Counters::add(&c.positions_solved, r.positions);
                    if let Some(ms) = state.materials.get_mut(&r.key.material) {
                        ms.unfinished -= 1;
                        if ms.unfinished == 0 && ms.table == TableState::Pending {
                            ms.table = TableState::Writing;
                            out.writes.push(r.key.material);
                        }
                    }
                }
                Action::Repaired { key } => {
                    Counters::add(&c.slices_resolved, 1);
                    info!(%key, "a lost slice was solved again, with its recorded hash");
                    // A table that could not be written without it is written now.
                    if let Some(ms) = state.materials.get_mut(&key.material) {
                        if ms.unfinished == 0
                            && matches!(ms.table, TableState::Failed(_) | TableState::AwaitingRepair)
                        {
                            ms.table = TableState::Writing;
                            out.writes.push(key.material);
                        }
                    }
                }
                Action::Lease(ref task) => {
                    debug!(lease = %task.lease, worker = %task.worker, slices = task.slices.len(), positions = task.positions, "task leased");
                    Counters::add(&c.leases_granted, 1);
                    if let Some(job) = state.jobs.get_mut(&task.job.0) {
                        job.started = true;
                    }
                    out.answers.push(a);
                }
                Action::Accepted {
                    lease,
                    new,
                    duplicates,
                } => {
                    debug!(%lease, new, duplicates, "completion accepted");
                    out.answers.push(a);
                }
                Action::Rejected { lease, ref reason } => {
                    warn!(%lease, %reason, "completion rejected");
                    out.answers.push(a);
                }
                Action::Expired { lease, worker } => {
                    Counters::add(&c.leases_expired, 1);
                    info!(%lease, %worker, "lease expired; its task goes to another worker");
                }
                Action::Revoked { lease, worker } => {
                    Counters::add(&c.leases_revoked, 1);
                    info!(%lease, %worker, "lease revoked: its slices were finished by another");
                }
                Action::WorkerForgotten { worker } => info!(%worker, "worker silent too long, forgotten"),
                Action::JobDone { job } => {
                    info!(%job, "every slice of the job is finished");
                    out.job_done = true;
                }
                Action::RepairQueued { queued: true, .. } => {
                    Counters::add(&c.slices_lost, 1);
                    out.answers.push(a);
                }
                Action::JobAccepted { .. }
                | Action::JobRejected { .. }
                | Action::Registered { .. }
                | Action::NoTask(_)
                | Action::LeaseStatus { .. }
                | Action::RepairQueued { queued: false, .. } => out.answers.push(a),
            }
        }
        if !records.is_empty() {
            self.sample_progress(state);
        }
        Ok(out)
    }

    /// Notes each job's positions done now, for its rate over the last minute.
    fn sample_progress(&self, state: &mut State) {
        let now = self.now();
        let progress: Vec<(u64, u64)> = state
            .scheduler
            .jobs()
            .map(|(j, p)| (j.0, p.positions_done))
            .collect();
        for (job, done) in progress {
            if let Some(rec) = state.jobs.get_mut(&job) {
                if rec.samples.back().map(|s| s.1) != Some(done) {
                    rec.samples.push_back((now, done));
                }
                while rec.samples.len() > 2 && rec.samples[1].0 + 60_000 <= now {
                    rec.samples.pop_front();
                }
            }
        }
    }
}
