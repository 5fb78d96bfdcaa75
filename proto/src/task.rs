//! The task of the wire, typed: the coordinator leases a [`Task`] as [`Task::to_wire`] writes it
//! and the worker reads it with [`Task::from_wire`], which checks every key ([`from_wire`]),
//! every hash's length, and that the fields agree (a verification names a hash for each slice,
//! a part has one slice, no slice is named twice). A [`SliceRef`] is a slice with the content
//! hash of its values, as a task names its successors and a completion its solved slices.

use std::collections::BTreeSet;

use zermelo_chess::SliceKey;

use crate::keys::{from_wire, to_wire, BadKey};

/// The content hash of a slice's values ([`crate::keys::slice_hash`]).
pub type Hash = [u8; 32];

/// A slice with the content hash of its values: the typed [`crate::SliceRef`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SliceRef {
    pub key: SliceKey,
    pub hash: Hash,
}

/// What a task asks of its worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    /// Solve these slices: independent, every successor finished.
    Solve(Vec<SliceKey>),
    /// Verify these slices, solved by another worker and uploaded with these hashes.
    Verify(Vec<SliceRef>),
    /// Solve part `index` of `parts` of one slice, with the group's other parts.
    Part(Part),
}

/// One part of a slice solved by a group of workers that meet through `Meet`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub key: SliceKey,
    /// Names the group in `Meet`: the lease of its part 0, the leader.
    pub group: u64,
    /// Parts in the group (at least 2).
    pub parts: u32,
    /// This part (below `parts`).
    pub index: u32,
}

/// A leased task, as both sides read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Task {
    pub lease_id: u64,
    /// The lease expires this long after the answer unless a heartbeat renews it.
    pub lease_ttl_ms: u64,
    /// The same deadline as a Unix time in milliseconds, for logs.
    pub deadline_unix_ms: u64,
    pub job_id: u64,
    pub work: Work,
    /// Every slice a move of the task's slices leads into, each with the hash it was accepted
    /// with, sorted.
    pub successors: Vec<SliceRef>,
}

/// A task or a slice reference from the wire that does not hold together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTask {
    #[error(transparent)]
    Key(#[from] BadKey),
    #[error("a slice reference with no key")]
    NoKey,
    #[error("slice {key} comes with a hash of {len} bytes, not 32")]
    HashLength { key: SliceKey, len: usize },
    #[error("slice {0} is to be solved but comes with a hash")]
    HashToSolve(SliceKey),
    #[error("slice {0} is named twice")]
    Twice(SliceKey),
    #[error("a task with no slice")]
    NoSlice,
    #[error("task kind {0} is not one this worker knows")]
    Kind(i32),
    #[error("part {index} of {parts} of {slices} slice(s) to {kind}")]
    BadPart {
        index: u32,
        parts: u32,
        slices: usize,
        kind: &'static str,
    },
}

impl SliceRef {
    pub fn to_wire(&self) -> crate::SliceRef {
        crate::SliceRef {
            key: Some(to_wire(&self.key)),
            hash: self.hash.to_vec(),
        }
    }

    /// A wire reference with a canonical key and a hash of 32 bytes.
    pub fn from_wire(wire: &crate::SliceRef) -> Result<SliceRef, BadTask> {
        let key = key_of(wire)?;
        let hash = wire.hash.as_slice().try_into().map_err(|_| BadTask::HashLength {
            key,
            len: wire.hash.len(),
        })?;
        Ok(SliceRef { key, hash })
    }
}

fn key_of(wire: &crate::SliceRef) -> Result<SliceKey, BadTask> {
    Ok(from_wire(wire.key.as_ref().ok_or(BadTask::NoKey)?)?)
}

/// Each key once, or the first named twice.
fn once<'a>(keys: impl Iterator<Item = &'a SliceKey>) -> Result<(), BadTask> {
    let mut seen = BTreeSet::new();
    for k in keys {
        if !seen.insert(*k) {
            return Err(BadTask::Twice(*k));
        }
    }
    Ok(())
}

impl Task {
    /// The task's slices (to solve, verify, or cut into parts).
    pub fn slices(&self) -> Vec<SliceKey> {
        match &self.work {
            Work::Solve(keys) => keys.clone(),
            Work::Verify(refs) => refs.iter().map(|r| r.key).collect(),
            Work::Part(p) => vec![p.key],
        }
    }

    pub fn to_wire(&self) -> crate::Task {
        let bare = |key: &SliceKey| crate::SliceRef {
            key: Some(to_wire(key)),
            hash: Vec::new(),
        };
        let (slices, kind, part) = match &self.work {
            Work::Solve(keys) => (keys.iter().map(bare).collect(), crate::TaskKind::Solve, None),
            Work::Verify(refs) => (
                refs.iter().map(SliceRef::to_wire).collect(),
                crate::TaskKind::Verify,
                None,
            ),
            Work::Part(p) => (
                vec![bare(&p.key)],
                crate::TaskKind::Solve,
                Some(crate::Part {
                    group: p.group,
                    parts: p.parts,
                    index: p.index,
                }),
            ),
        };
        crate::Task {
            lease_id: self.lease_id,
            lease_ttl_ms: self.lease_ttl_ms,
            deadline_unix_ms: self.deadline_unix_ms,
            job_id: self.job_id,
            slices,
            successors: self.successors.iter().map(SliceRef::to_wire).collect(),
            kind: kind as i32,
            part,
        }
    }

    /// A task from the wire, every key and hash checked and the fields in agreement.
    pub fn from_wire(wire: &crate::Task) -> Result<Task, BadTask> {
        let successors = refs(&wire.successors)?;
        if wire.slices.is_empty() {
            return Err(BadTask::NoSlice);
        }
        let work = match crate::TaskKind::try_from(wire.kind) {
            Ok(crate::TaskKind::Verify) => {
                let refs = refs(&wire.slices)?;
                if let Some(p) = &wire.part {
                    return Err(bad_part(p, refs.len(), "verify"));
                }
                Work::Verify(refs)
            }
            Ok(crate::TaskKind::Solve) => {
                let mut keys = Vec::with_capacity(wire.slices.len());
                for r in &wire.slices {
                    let key = key_of(r)?;
                    if !r.hash.is_empty() {
                        return Err(BadTask::HashToSolve(key));
                    }
                    keys.push(key);
                }
                once(keys.iter())?;
                match (&wire.part, &keys[..]) {
                    (None, _) => Work::Solve(keys),
                    (Some(p), [key]) if p.parts >= 2 && p.index < p.parts => Work::Part(Part {
                        key: *key,
                        group: p.group,
                        parts: p.parts,
                        index: p.index,
                    }),
                    (Some(p), _) => return Err(bad_part(p, keys.len(), "solve")),
                }
            }
            Err(_) => return Err(BadTask::Kind(wire.kind)),
        };
        Ok(Task {
            lease_id: wire.lease_id,
            lease_ttl_ms: wire.lease_ttl_ms,
            deadline_unix_ms: wire.deadline_unix_ms,
            job_id: wire.job_id,
            work,
            successors,
        })
    }
}

/// Wire references, each checked, none of a key named twice.
fn refs(wire: &[crate::SliceRef]) -> Result<Vec<SliceRef>, BadTask> {
    let refs = wire
        .iter()
        .map(SliceRef::from_wire)
        .collect::<Result<Vec<_>, _>>()?;
    once(refs.iter().map(|r| &r.key))?;
    Ok(refs)
}

fn bad_part(p: &crate::Part, slices: usize, kind: &'static str) -> BadTask {
    BadTask::BadPart {
        index: p.index,
        parts: p.parts,
        slices,
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use zermelo_chess::{Bitboard, Material};

    fn key(material: &str, white: u64, black: u64) -> SliceKey {
        let m: Material = material.parse().unwrap();
        SliceKey::normalize(m, Bitboard(white), Bitboard(black)).unwrap()
    }

    fn task(work: Work) -> Task {
        Task {
            lease_id: 3,
            lease_ttl_ms: 30_000,
            deadline_unix_ms: 1_800_000_000_000,
            job_id: 1,
            work,
            successors: vec![
                SliceRef {
                    key: key("KQvK", 0, 0),
                    hash: [1; 32],
                },
                SliceRef {
                    key: key("KPvK", 1 << 12, 0),
                    hash: [2; 32],
                },
            ],
        }
    }

    /// Through the wire's bytes and back.
    fn through_bytes(t: &Task) -> Result<Task, BadTask> {
        let bytes = t.to_wire().encode_to_vec();
        Task::from_wire(&crate::Task::decode(bytes.as_slice()).expect("decodes"))
    }

    #[test]
    fn every_kind_of_task_comes_back_as_it_went() {
        let kpvk = key("KPvK", 1 << 13, 0);
        for work in [
            Work::Solve(vec![kpvk, key("KPvK", 1 << 14, 0)]),
            Work::Verify(vec![SliceRef {
                key: kpvk,
                hash: [9; 32],
            }]),
            Work::Part(Part {
                key: key("KRvKN", 0, 0),
                group: 7,
                parts: 3,
                index: 2,
            }),
        ] {
            let t = task(work);
            assert_eq!(through_bytes(&t), Ok(t));
        }
    }

    #[test]
    fn a_task_that_does_not_hold_together_is_refused() {
        let kpvk = key("KPvK", 1 << 13, 0);
        let solve = task(Work::Solve(vec![kpvk])).to_wire();

        let mut w = solve.clone();
        w.successors[1].hash.pop();
        assert_eq!(
            Task::from_wire(&w),
            Err(BadTask::HashLength {
                key: key("KPvK", 1 << 12, 0),
                len: 31
            })
        );

        let mut w = solve.clone();
        w.successors.push(w.successors[0].clone());
        assert_eq!(Task::from_wire(&w), Err(BadTask::Twice(key("KQvK", 0, 0))));

        let mut w = solve.clone();
        w.slices.push(w.slices[0].clone());
        assert_eq!(Task::from_wire(&w), Err(BadTask::Twice(kpvk)));

        let mut w = solve.clone();
        w.slices[0].hash = vec![0; 32];
        assert_eq!(Task::from_wire(&w), Err(BadTask::HashToSolve(kpvk)));

        let mut w = solve.clone();
        w.slices.clear();
        assert_eq!(Task::from_wire(&w), Err(BadTask::NoSlice));

        let mut w = solve.clone();
        w.kind = 9;
        assert_eq!(Task::from_wire(&w), Err(BadTask::Kind(9)));

        let mut w = solve.clone();
        w.successors[0].key = None;
        assert_eq!(Task::from_wire(&w), Err(BadTask::NoKey));

        // A key that is not canonical (a pawn on the h-file mirrors to the a-file).
        let mut w = solve.clone();
        w.slices[0].key.as_mut().unwrap().white_pawns = 1 << 15;
        assert!(matches!(Task::from_wire(&w), Err(BadTask::Key(_))));

        // A verification without its hashes.
        let mut w = solve.clone();
        w.kind = crate::TaskKind::Verify as i32;
        assert_eq!(
            Task::from_wire(&w),
            Err(BadTask::HashLength { key: kpvk, len: 0 })
        );

        // Parts: of one slice to solve, index below parts, at least two.
        for (parts, index, slices, kind) in [(3, 3, 1, 0), (1, 0, 1, 0), (2, 0, 2, 0), (2, 0, 1, 1)] {
            let mut w = solve.clone();
            w.part = Some(crate::Part {
                group: 1,
                parts,
                index,
            });
            if slices == 2 {
                w.slices.push(crate::SliceRef {
                    key: Some(to_wire(&key("KPvK", 1 << 14, 0))),
                    hash: Vec::new(),
                });
            }
            if kind == 1 {
                w.kind = crate::TaskKind::Verify as i32;
                for r in &mut w.slices {
                    r.hash = vec![0; 32];
                }
            }
            assert!(
                matches!(Task::from_wire(&w), Err(BadTask::BadPart { .. })),
                "part {index} of {parts}, {slices} slice(s), kind {kind}"
            );
        }
    }
}
