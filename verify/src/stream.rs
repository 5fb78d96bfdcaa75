//! The check of a slice whose values arrive in order, a piece at a time: [`check_slice`] for a
//! slice too large to hold whole (a six-man slice takes gigabytes).
//!
//! Range and legality are checked as the values go by, run by run of the decoder's legality
//! ([`Decoder::legality_run`]). The sample needs values of the slice itself (the sampled ones,
//! and the children of sampled positions that stay in the slice): before the first value, the
//! sampled positions are derived once with every value of the slice read as a draw, which
//! notes the indices the derivation reads; those values are kept as they go by, and at the end
//! the sample is derived again from them. A derivation that reads an index the first one did
//! not (it cannot, as a position's children do not depend on values, but nothing here relies on
//! it) finds it unavailable and is skipped, as one whose successor is not at hand.
//!
//! [`check_slice`]: super::check_slice

use std::borrow::Cow;
use std::sync::Mutex;

use super::index::Decoder;
use super::material::{Material, Pawns};
use super::{
    canonical_slice, check_stored, given_successor, value, Half, SliceCheck, Slices, Successor,
    SuccessorValues, VerifyError, Worker,
};

/// The check of one slice as its values arrive in order (both sides to move, White's first, as
/// a slice is stored): [`new`](SliceStream::new), [`push`](SliceStream::push) every value, then
/// [`finish`](SliceStream::finish). It holds one legality run and the values the sample needs,
/// whatever the slice's size. Shares no chess code with the solver.
pub struct SliceStream {
    material: Material,
    name: String,
    key: [u64; 2],
    decoder: Decoder,
    per_side: u64,
    /// The index the next value stands for.
    next: u64,
    /// Legality of the placements `run_start..run_start + run.len()`.
    run: Vec<[bool; 2]>,
    run_start: u64,
    /// The sampled indices, sorted.
    sample: Vec<u64>,
    /// The indices whose values the sample reads (the sampled ones among them), sorted, and
    /// their values as they went by (`kept[i]` for `needed[i]`).
    needed: Vec<u64>,
    kept: Vec<u16>,
}

impl SliceStream {
    /// The check of slice `key` of `material` (normalized name, canonical key), re-deriving
    /// the values at `sample` (indices below the slice's length; others are left out) from
    /// their children, read from the slice itself and from `successor` (as in
    /// [`check_slice`](super::check_slice)).
    pub fn new(
        material: &str,
        key: [u64; 2],
        sample: &[u64],
        successor: &SuccessorValues<'_>,
    ) -> Result<SliceStream, VerifyError> {
        let normal = canonical_slice(material, key)?;
        let per_side = normal.per_side();
        let mut sample: Vec<u64> = sample.iter().copied().filter(|&i| i < 2 * per_side).collect();
        sample.sort_unstable();
        sample.dedup();
        // The dry run: which values of the slice does deriving the sample read?
        let noting = Own {
            successor,
            values: None,
            noted: Mutex::new(sample.clone()),
        };
        let half = Half::held(Cow::Borrowed(&[]), 0);
        let mut worker = Worker::new(&noting, normal, key, &half);
        for &index in &sample {
            // Its stored value is not known yet: a mismatch is expected, and nothing is judged.
            let _ = worker.check_range(index, &[value::DRAW as u16], || false);
        }
        let mut needed = noting.noted.into_inner().unwrap_or_else(|e| e.into_inner());
        needed.sort_unstable();
        needed.dedup();
        Ok(SliceStream {
            material: normal,
            name: normal.to_string(),
            key,
            decoder: Decoder::new(&normal, key),
            per_side,
            next: 0,
            run: Vec::new(),
            run_start: 0,
            sample,
            kept: Vec::with_capacity(needed.len()),
            needed,
        })
    }

    /// The next values, in index order: each is checked for range and legality, and kept if
    /// the sample needs it. The first wrong one is an error (and the stream is then spent).
    pub fn push(&mut self, values: &[u16]) -> Result<(), VerifyError> {
        let len = 2 * self.per_side;
        if self.next + values.len() as u64 > len {
            return Err(self.wrong_size(self.next + values.len() as u64));
        }
        for &stored in values {
            let index = self.next;
            let (side, p) = ((index / self.per_side) as usize, index % self.per_side);
            if !(self.run_start..self.run_start + self.run.len() as u64).contains(&p) {
                self.run_start = p - p % self.decoder.legality_run_len();
                self.decoder.legality_run(self.run_start, &mut self.run);
            }
            let legal = self.run[(p - self.run_start) as usize][side];
            check_stored(&self.decoder, &self.name, self.key, index, legal, stored)?;
            if self.needed.get(self.kept.len()) == Some(&index) {
                self.kept.push(stored);
            }
            self.next += 1;
        }
        Ok(())
    }

    /// After the last value: the sample derived from its children and compared with the
    /// values kept, reading successors through `successor`.
    pub fn finish(self, successor: &SuccessorValues<'_>) -> Result<SliceCheck, VerifyError> {
        if self.next != 2 * self.per_side {
            return Err(self.wrong_size(self.next));
        }
        let own = Own {
            successor,
            values: Some((&self.needed, &self.kept)),
            noted: Mutex::new(Vec::new()),
        };
        let half = Half::held(Cow::Borrowed(&[]), 0);
        let mut worker = Worker::new(&own, self.material, self.key, &half);
        let mut report = SliceCheck {
            indices: self.next,
            ..SliceCheck::default()
        };
        for &index in &self.sample {
            let at = self.needed.binary_search(&index).expect("the sample is needed");
            match worker.check_range(index, &self.kept[at..at + 1], || false) {
                Ok(positions) => report.derived += positions,
                Err(VerifyError::Unavailable { .. }) => report.skipped += 1,
                Err(e) => return Err(e),
            }
        }
        Ok(report)
    }

    fn wrong_size(&self, count: u64) -> VerifyError {
        VerifyError::WrongSliceSize {
            material: self.name.clone(),
            key: Pawns(self.key),
            count,
            expected: 2 * self.per_side,
        }
    }
}

/// The slices a stream's sample reads: successors from the caller; values of the slice itself
/// from those kept (`values`: indices, sorted, and their values), or, in the dry run (`None`),
/// every one a draw, its index noted.
struct Own<'a> {
    successor: &'a SuccessorValues<'a>,
    values: Option<(&'a [u64], &'a [u16])>,
    noted: Mutex<Vec<u64>>,
}

impl Slices for Own<'_> {
    fn successor(&self, material: Material, key: [u64; 2]) -> Result<Successor, VerifyError> {
        given_successor(self.successor, material, key)
    }

    fn own(&self, material: Material, key: [u64; 2], index: u64) -> Result<u16, VerifyError> {
        let Some((needed, kept)) = self.values else {
            self.noted.lock().unwrap_or_else(|e| e.into_inner()).push(index);
            return Ok(value::DRAW as u16);
        };
        match needed.binary_search(&index) {
            Ok(at) => Ok(kept[at]),
            Err(_) => Err(VerifyError::Unavailable {
                material: material.to_string(),
                key: Pawns(key),
            }),
        }
    }
}
