//! `Meet`: the parts of a slice solved by several workers ([`schedule::Config::parts`]) give
//! each other what crosses between them, through the coordinator. Each meeting is a round: every
//! part streams its gifts (opaque bytes, one for each other part), and once all parts of the
//! group have given, each is answered with what the others gave it. The coordinator reads none
//! of it (each part checks what it is given against its slice); it checks who may give what:
//! only a live part lease of the group, by its worker, the next round of that part, gifts to the
//! group's other parts only, and no more bytes than a bound on the slice's size.
//!
//! A group whose lease ends (a part lost, or the leader done) takes its meetings with it: a part
//! waiting in one is answered ABORTED.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tonic::{Status, Streaming};
use tracing::debug;
use zermelo_chess::index::SliceIndexer;
use zermelo_proto as pb;

use super::{CoordinatorService, MeetStream, CHUNK_BYTES};
use crate::metrics::Counters;
use crate::schedule::{LeaseId, PartOf};

/// The most bytes one part may give at one meeting of a slice of `positions` positions: its
/// values compressed at worst (2 bytes a position, zstd's bound) or its lines of predecessors
/// (16 bytes a line of 64), with room to spare.
fn max_gift_bytes(positions: u64) -> u64 {
    (4 * positions).max(64 << 20)
}

/// The meetings of every live group, by group (its leader's lease).
#[derive(Default)]
pub(super) struct Meetings {
    groups: Mutex<HashMap<LeaseId, Rounds>>,
    /// Woken whenever a part gives: the parts waiting look again.
    given: Notify,
}

/// A group's meetings under way.
struct Rounds {
    parts: usize,
    /// Per part, the round it gives next.
    next: Vec<u64>,
    rounds: BTreeMap<u64, Round>,
}

struct Round {
    /// Per part, what it gave (per part it gave to), once it has.
    given: Vec<Option<Vec<Vec<u8>>>>,
    /// Per part, whether it took what it was given.
    taken: Vec<bool>,
}

impl Meetings {
    fn lock(&self) -> MutexGuard<'_, HashMap<LeaseId, Rounds>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Part `part.index` gives `gifts` (one per part) at `round`.
    fn give(&self, part: PartOf, round: u64, gifts: Vec<Vec<u8>>) -> Result<(), Status> {
        let parts = part.parts as usize;
        let me = part.index as usize;
        let mut groups = self.lock();
        let g = groups.entry(part.group).or_insert_with(|| Rounds {
            parts,
            next: vec![0; parts],
            rounds: BTreeMap::new(),
        });
        if g.parts != parts || g.next[me] != round {
            return Err(Status::failed_precondition(format!(
                "part {me} of group {} gives at round {round}, but its next round is {}",
                part.group, g.next[me]
            )));
        }
        let r = g.rounds.entry(round).or_insert_with(|| Round {
            given: vec![None; parts],
            taken: vec![false; parts],
        });
        r.given[me] = Some(gifts);
        drop(groups);
        self.given.notify_waiters();
        Ok(())
    }

    /// What the other parts gave part `part.index` at `round` (`(giver, bytes)`), once they all
    /// have; `None` before.
    fn take(&self, part: PartOf, round: u64) -> Option<Vec<(u32, Vec<u8>)>> {
        let me = part.index as usize;
        let mut groups = self.lock();
        let g = groups.get_mut(&part.group)?;
        let r = g.rounds.get_mut(&round)?;
        if r.given.iter().any(Option::is_none) {
            return None;
        }
        let mine = r
            .given
            .iter_mut()
            .enumerate()
            .filter(|&(k, _)| k != me)
            .map(|(k, gifts)| (k as u32, std::mem::take(&mut gifts.as_mut().expect("given")[me])))
            .collect();
        r.taken[me] = true;
        if r.taken.iter().all(|&t| t) {
            g.rounds.remove(&round);
        }
        g.next[me] = round + 1;
        Some(mine)
    }
}

impl CoordinatorService {
    /// One part's side of a meeting: reads its gifts, waits for the other parts, and answers
    /// with what they gave it.
    pub(super) async fn meet_parts(
        &self,
        mut stream: Streaming<pb::MeetChunk>,
    ) -> Result<MeetStream, Status> {
        let first = stream
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("a meeting without a chunk"))?;
        let header = first
            .header
            .ok_or_else(|| Status::invalid_argument("a meeting's first chunk has no header"))?;
        let lease = LeaseId(header.lease_id);
        let (part, positions) = self.live_part(lease, header.worker_id)?;
        let parts = part.parts as usize;
        let limit = max_gift_bytes(positions);
        let mut gifts: Vec<Vec<u8>> = vec![Vec::new(); parts];
        let mut total = 0u64;
        let mut chunk = Some(first);
        while let Some(c) = chunk {
            let peer = c.peer as usize;
            if peer >= parts || peer == part.index as usize {
                return Err(Status::invalid_argument(format!(
                    "part {} of {parts} gives to part {peer}",
                    part.index
                )));
            }
            total += c.data.len() as u64;
            if total > limit {
                return Err(Status::resource_exhausted(format!(
                    "a part gives more than {limit} bytes at one meeting"
                )));
            }
            Counters::add(&self.shared.counters.bytes_met, c.data.len() as u64);
            gifts[peer].extend_from_slice(&c.data);
            chunk = stream.message().await?;
        }
        let round = header.round;
        self.shared.meetings.give(part, round, gifts)?;
        debug!(%lease, group = %part.group, part = part.index, round, bytes = total, "given");

        let mine = loop {
            let notified = self.shared.meetings.given.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(mine) = self.shared.meetings.take(part, round) {
                break mine;
            }
            // A part lost ends the group: the others hear it here, not after a lease's time.
            self.live_part(lease, header.worker_id)?;
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        };
        let mut chunks = Vec::new();
        for (from, bytes) in mine {
            for data in bytes.chunks(CHUNK_BYTES) {
                chunks.push(Ok(pb::MeetChunk {
                    header: None,
                    peer: from,
                    data: data.to_vec(),
                }));
            }
        }
        Ok(Box::pin(tokio_stream::iter(chunks)))
    }

    /// The part that `lease` is, live, held by `worker`, and its slice's positions; ABORTED if
    /// it is not (its group failed or ended: the part drops its work).
    fn live_part(&self, lease: LeaseId, worker: u64) -> Result<(PartOf, u64), Status> {
        let state = self.lock();
        let s = &state.scheduler;
        let (part, holder) = s
            .part_of(lease)
            .filter(|&(part, _)| s.group_alive(part.group))
            .ok_or_else(|| {
                Status::aborted(format!(
                    "{lease} is not a live part of a group (its group failed or ended)"
                ))
            })?;
        if holder.0 != worker {
            return Err(Status::permission_denied(format!(
                "{lease} is not worker-{worker}'s"
            )));
        }
        let positions = s
            .lease_holder(part.group)
            .map(|(_, slices)| slices.iter().map(|k| SliceIndexer::new(*k).size()).sum())
            .unwrap_or(0);
        Ok((part, positions))
    }

    /// Drops the meetings of groups that ended.
    pub(super) fn forget_ended_meetings(&self) {
        let state = self.lock();
        self.shared
            .meetings
            .lock()
            .retain(|&group, _| state.scheduler.group_alive(group));
        drop(state);
        // Parts waiting in a meeting of an ended group look again now.
        self.shared.meetings.given.notify_waiters();
    }
}
