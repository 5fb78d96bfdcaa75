//! `--verify all`: the completion of a verification task. The worker that verified a solved
//! task's slices (re-deriving every position) says whether they agreed. Its word is not taken
//! blindly when it says a slice is wrong: the coordinator re-derives the value it names, with
//! the independent verifier, from the stored slice and its successors. Confirmed, the solver is
//! refused and the task solved again; refuted, the verifier is refused and the task waits for
//! another verifier. A verifier that says "agreed" of a wrong slice is caught only by the
//! sample check of the upload (see the README, "What a token holder can and cannot do").

use super::transfers::StoreReader;
use super::*;
use crate::schedule::VerificationLease;

/// What the coordinator's own re-derivation made of a verifier's claim.
enum Claim {
    /// The slice is wrong (at the index named or elsewhere): what is wrong.
    Confirmed(String),
    /// The value named agrees with its children, and the rest is in range and legal.
    Refuted,
    /// It cannot tell: the slice is not readable, or the position needs a successor too large
    /// to read here.
    Undecided(String),
}

impl CoordinatorService {
    /// A `CompleteTask` that carries a verdict: only from the worker holding the live
    /// verification lease.
    pub(super) async fn complete_verification(
        &self,
        lease: LeaseId,
        worker: WorkerId,
        verdict: pb::Verdict,
    ) -> Result<Response<pb::CompleteTaskResponse>, Status> {
        let rejected = |reason: String| {
            let result = pb::complete_task_response::Result::Rejected(pb::Rejected { reason });
            Ok(Response::new(pb::CompleteTaskResponse { result: Some(result) }))
        };
        let held = self.lock().scheduler.verification(lease);
        let Some(VerificationLease {
            verifier,
            solver,
            slices,
        }) = held.filter(|h| h.verifier == worker)
        else {
            Counters::add(&self.shared.counters.not_allowed, 1);
            let reason = format!(
                "{lease} is not a live verification lease of worker {worker}: only its holder gives its verdict"
            );
            warn!(%lease, %reason, "verdict refused");
            return rejected(reason);
        };
        let c = &self.shared.counters;
        let agreed = if verdict.agreed {
            true
        } else {
            let named = verdict.slice.as_ref().and_then(|k| from_wire(k).ok());
            let Some((key, hash)) = named.and_then(|k| slices.iter().copied().find(|(s, _)| *s == k)) else {
                warn!(%lease, %verifier, "a verdict naming no slice of its task: the verifier is refused");
                Counters::add(&c.verdicts_refuted, 1);
                self.refuse_worker(verifier, "a verdict of it named no slice of its task");
                return rejected("the verdict names no slice of the task".into());
            };
            let index = verdict.index;
            let this = self.clone();
            let claim = tokio::task::spawn_blocking(move || this.judge_claim_blocking(&key, &hash, index))
                .await
                .map_err(ServiceError::from)?;
            match claim {
                Claim::Confirmed(why) => {
                    warn!(%key, index, %solver, %verifier, reason = %why, "a verifier found a solved slice wrong, and so does the coordinator: the solver is refused, the task solved again");
                    Counters::add(&c.verifications_failed, 1);
                    self.refuse_worker(
                        solver,
                        "a slice it solved was found wrong by another worker's verification, and by the coordinator's check of its values",
                    );
                    false
                }
                Claim::Refuted => {
                    // The claim is the worker's text: logged escaped and bounded, like its name.
                    let claim = printable_name(&verdict.reason);
                    warn!(%key, index, %verifier, %claim, "a verifier's claim of a wrong value is refuted by the coordinator: the verifier is refused");
                    Counters::add(&c.verdicts_refuted, 1);
                    self.refuse_worker(
                        verifier,
                        "its verdict of a wrong value was refuted by the coordinator's check of its values",
                    );
                    return rejected(format!(
                        "slice {key}, index {index}: the value agrees with its children"
                    ));
                }
                Claim::Undecided(why) => {
                    warn!(%key, index, reason = %why, "a verifier's claim of a wrong value cannot be settled here: the task is solved again, no worker refused");
                    false
                }
            }
        };
        let this = self.clone();
        let (answer, writes) = tokio::task::spawn_blocking(move || {
            let mut state = this.lock();
            this.complete_locked(&mut state, Event::Verified { lease, agreed })
        })
        .await
        .map_err(ServiceError::from)??;
        if agreed
            && matches!(
                answer.result,
                Some(pb::complete_task_response::Result::Accepted(_))
            )
        {
            Counters::add(&self.shared.counters.slices_verified, slices.len() as u64);
            debug!(%lease, %verifier, %solver, slices = slices.len(), "verified");
        }
        self.write_tables(writes).await?;
        Ok(Response::new(answer))
    }

    /// Re-derives index `index` of stored slice `key` (uploaded with `hash`), the whole slice
    /// checked for range and legality on the way. Blocking.
    fn judge_claim_blocking(&self, key: &SliceKey, hash: &Hash, index: u64) -> Claim {
        let store = &self.shared.store;
        let mut unreadable = None;
        let mut fill = |push: &mut dyn FnMut(&[u16]) -> Result<(), String>| {
            store
                .for_each_value_blocking(key, hash, &mut |v: &[u16]| push(v).map_err(Judging::Wrong))
                .map_err(|e| match e {
                    Judging::Wrong(why) => why,
                    Judging::Store(e) => {
                        let why = e.to_string();
                        unreadable = Some(why.clone());
                        why
                    }
                })
        };
        let checked = self
            .shared
            .check
            .check_index_blocking(key, index, &mut fill, &StoreReader(self));
        match (checked, unreadable) {
            (_, Some(why)) => Claim::Undecided(why),
            (Ok(r), None) if r.skipped > 0 => {
                Claim::Undecided(format!("index {index} needs a successor too large to read here"))
            }
            (Ok(_), None) => Claim::Refuted,
            (Err(why), None) => Claim::Confirmed(why),
        }
    }
}

/// Why the values of a slice under judgement stopped: the check found them wrong, or the store
/// could not give them.
enum Judging {
    Wrong(String),
    Store(StoreError),
}

impl From<StoreError> for Judging {
    fn from(e: StoreError) -> Judging {
        Judging::Store(e)
    }
}
