//! `Meet`: the parts of a slice solved by several workers ([`schedule::Config::parts`]) give
//! each other what crosses between them, through the coordinator. Each meeting is a round: every
//! part streams its gifts (opaque bytes, one for each other part), and once all parts of the
//! group have given, each is answered with what the others gave it. The coordinator reads none
//! of it (each part checks what it is given against its slice); it checks who may give what:
//! only a live part lease of the group, by its worker, the next round of that part, gifts to the
//! group's other parts only, and no more bytes than a bound on the slice's size.
//!
//! What the parts give waits on disk (`STATE/meetings/GROUP/ROUND-FROM-TO`), not in memory: a
//! round can carry a slice's values (in 3 parts, two thirds of them at the last round,
//! compressed; KRNvKNN's table is 1.9 GB). Each file is streamed to its part a chunk at a time
//! and removed once read.
//!
//! A group whose lease ends (a part lost, or the leader done) takes its meetings with it: a part
//! waiting in one is answered ABORTED, and the group's folder is removed.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
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
pub(super) struct Meetings {
    /// The folder of the gifts on disk.
    dir: PathBuf,
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
    /// Per part, whether it gave (its gifts are files, see [`Meetings::gift`]).
    given: Vec<bool>,
    /// Per part, whether it took what it was given.
    taken: Vec<bool>,
}

/// What a part takes from a meeting: per other part, the file of its gift, if it gave any.
type Taken = Vec<(u32, Option<PathBuf>)>;

impl Meetings {
    pub(super) fn new(dir: PathBuf) -> Meetings {
        // What an earlier life of the coordinator left: its groups are gone.
        let _ = std::fs::remove_dir_all(&dir);
        Meetings {
            dir,
            groups: Mutex::default(),
            given: Notify::new(),
        }
    }

    /// The file of what part `from` gives part `to` at `round` of `group`.
    fn gift(&self, group: LeaseId, round: u64, from: usize, to: usize) -> PathBuf {
        self.dir
            .join(group.0.to_string())
            .join(format!("{round}-{from}-{to}"))
    }

    /// Checks that part `part.index` may give at `round` (its next round).
    fn may_give(&self, part: PartOf, round: u64) -> Result<(), Status> {
        let parts = part.parts as usize;
        let me = part.index as usize;
        let groups = self.lock();
        let next = groups
            .get(&part.group)
            .map_or(Some(0), |g| (g.parts == parts).then(|| g.next[me]));
        if next != Some(round) {
            return Err(Status::failed_precondition(format!(
                "part {me} of group {} gives at round {round}, not its next round",
                part.group
            )));
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<LeaseId, Rounds>> {
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Part `part.index` has given at `round` (its gifts are on disk).
    fn give(&self, part: PartOf, round: u64) -> Result<(), Status> {
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
            given: vec![false; parts],
            taken: vec![false; parts],
        });
        r.given[me] = true;
        drop(groups);
        self.given.notify_waiters();
        Ok(())
    }

    /// What the other parts gave part `part.index` at `round` (per giver, its gift's file if
    /// it gave any), once they all have; `None` before.
    fn take(&self, part: PartOf, round: u64) -> Option<Taken> {
        let me = part.index as usize;
        let mut groups = self.lock();
        let g = groups.get_mut(&part.group)?;
        let r = g.rounds.get_mut(&round)?;
        if !r.given.iter().all(|&g| g) {
            return None;
        }
        let mine = (0..g.parts)
            .filter(|&k| k != me)
            .map(|k| {
                let file = self.gift(part.group, round, k, me);
                (k as u32, file.exists().then_some(file))
            })
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
        let round = header.round;
        self.shared.meetings.may_give(part, round)?;
        // Each gift to its file, as it comes.
        let spool = |e: std::io::Error| Status::internal(format!("spooling a meeting's gift: {e}"));
        let folder = self.shared.meetings.dir.join(part.group.0.to_string());
        std::fs::create_dir_all(&folder).map_err(spool)?;
        let mut files: Vec<Option<std::fs::File>> = (0..parts).map(|_| None).collect();
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
            if !c.data.is_empty() {
                if files[peer].is_none() {
                    let path = self
                        .shared
                        .meetings
                        .gift(part.group, round, part.index as usize, peer);
                    files[peer] = Some(std::fs::File::create(path).map_err(spool)?);
                }
                files[peer]
                    .as_mut()
                    .expect("created above")
                    .write_all(&c.data)
                    .map_err(spool)?;
            }
            chunk = stream.message().await?;
        }
        drop(files);
        self.shared.meetings.give(part, round)?;
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
        // Each gift streamed from its file a chunk at a time, the file removed once read.
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<pb::MeetChunk, Status>>(4);
        tokio::task::spawn_blocking(move || {
            for (from, file) in mine {
                let Some(path) = file else { continue };
                if let Err(e) = send_file(&path, from, &tx) {
                    let _ = tx.blocking_send(Err(Status::internal(format!("reading a meeting's gift: {e}"))));
                    return;
                }
            }
        });
        Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
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

    /// Drops the meetings of groups that ended, with their files.
    pub(super) fn forget_ended_meetings(&self) {
        let state = self.lock();
        let meetings = &self.shared.meetings;
        let mut ended = Vec::new();
        meetings.lock().retain(|&group, _| {
            let alive = state.scheduler.group_alive(group);
            if !alive {
                ended.push(group);
            }
            alive
        });
        drop(state);
        for group in ended {
            let _ = std::fs::remove_dir_all(meetings.dir.join(group.0.to_string()));
        }
        // Parts waiting in a meeting of an ended group look again now.
        self.shared.meetings.given.notify_waiters();
    }
}

/// Sends the file at `path` as chunks from part `from`, then removes it.
fn send_file(
    path: &Path,
    from: u32,
    tx: &tokio::sync::mpsc::Sender<Result<pb::MeetChunk, Status>>,
) -> std::io::Result<()> {
    let mut file = std::fs::File::open(path)?;
    loop {
        let mut data = vec![0u8; CHUNK_BYTES];
        let n = file.read(&mut data)?;
        if n == 0 {
            break;
        }
        data.truncate(n);
        let chunk = pb::MeetChunk {
            header: None,
            peer: from,
            data,
        };
        if tx.blocking_send(Ok(chunk)).is_err() {
            break; // the part went away
        }
    }
    std::fs::remove_file(path)
}
