//! The slice solver: pure and synchronous. It turns a slice key and the values of its successor
//! slices ([`Successors`]) into the slice's values: the index and its moves, init and the
//! retrograde passes ([`retrograde`], the solver used to build tables; `bits`, the compact
//! solver for pawnless slices whose byte of state a position does not fit, three bits a
//! position, the same values; [`reference`](mod@reference), the first solver, kept as a second
//! path for tests), on a few threads ([`par`]). It knows nothing of
//! table files, the cluster or async code.

mod bits;
mod checkpoint;
mod dtm_log;
pub mod dtz50;
mod geometry;
mod le;
mod memory;
mod paging;
pub mod par;
mod parts;
mod pawn_exits;
pub mod reference;
pub mod retrograde;
mod split;
mod stage;
mod state;

use zermelo_chess::slice::SliceKey;
use zermelo_chess::value::MAX_PLIES;
use zermelo_chess::{Position, Value};

pub use bits::{bits_solvable, bits_state_bytes, solve_slice_bits};
pub use checkpoint::Checkpoints;
pub use dtm_log::SEG_INDICES;
pub use paging::{kslice_resident_bytes, Paging, MIN_RESIDENT_KSLICES, PAGED_BYTES_PER_INDEX};
pub use parts::{
    part_state_bytes, part_state_shares, solve_in_parts, solve_part, splittable, Crossed, Exchange,
    GiveWords, TakeWords,
};
pub use retrograde::{
    init_together, solve_slice, solve_slice_into, solve_slice_resumable, solve_slices_into, Sink,
};
pub use stage::{stage, STAGE_FROM};
pub use state::SPILL_FROM;

/// Bytes the solver holds for one slice of `positions` positions, with pawns if `pawns`, apart
/// from its threads' buffers ([`thread_bytes`]): its state, a byte a position, per-chunk
/// summaries (1/64 byte) and, for a slice solved by lines of 64, a bit a position (the
/// won-or-illegal bitmap), and with pawns another (the bitmap of positions a win cannot
/// change) and finer summaries (another 1/64 byte); and the log of its plies when that stays
/// in memory (at most a byte a position, for slices under [`SPILL_FROM`] positions; a larger
/// slice's goes to a temporary file). The bitmaps are counted for every slice, solved by lines
/// or not.
pub fn slice_state_bytes(positions: u64, pawns: bool) -> u64 {
    let log = if positions < SPILL_FROM as u64 {
        positions
    } else {
        0
    };
    let (bitmaps, summaries) = if pawns { (2, 2) } else { (1, 1) };
    positions + summaries * (positions / 64) + bitmaps * (positions / 8) + log
}

/// Bytes each solving thread holds for a slice of `positions` positions: the values of one
/// segment being written out of the state (up to [`SEG_INDICES`] values of 2 bytes), and if
/// `changed_bits` (a slice with pawns solved with them, see [`solve_slice_into`]) its bitmap of
/// the positions changed in a pass (a bit a position; counted for every slice with pawns).
pub fn thread_bytes(positions: u64, changed_bits: bool) -> u64 {
    let changed = if changed_bits { positions / 8 } else { 0 };
    2 * positions.min(SEG_INDICES as u64) + changed
}

/// What a pawnless slice of `positions` indices solved with its state paged ([`Paging`]) holds
/// in memory, besides what its caller holds per thread (`caller_per_thread`: the buffers of the
/// values written out, the cache of blocks successors are read through).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagedNeed {
    /// The least it needs: [`PagedNeed::fixed`] and [`MIN_RESIDENT_KSLICES`] K-slices of state.
    pub least: u64,
    /// What stays in memory whatever the budget: the slice's summaries (a byte per 64
    /// positions) and each thread's buffers ([`thread_bytes`] and `caller_per_thread`). A
    /// budget of `fixed + r` keeps `r` bytes of the state resident.
    pub fixed: u64,
}

/// See [`PagedNeed`]. The state of a slice with pawns is never paged (its slices are small:
/// a pawn configuration each).
pub fn paged_need(positions: u64, threads: usize, caller_per_thread: u64) -> PagedNeed {
    let per_thread = thread_bytes(positions, false) + caller_per_thread;
    let fixed = positions / 64 + threads.max(1) as u64 * per_thread;
    PagedNeed {
        least: fixed + paged_least(positions),
        fixed,
    }
}

/// The least of the byte solver's state of a pawnless slice of `positions` positions (or of a
/// part of it) held resident when paged: [`MIN_RESIDENT_KSLICES`] K-slices.
pub fn paged_least(positions: u64) -> u64 {
    let kslice = positions / 2 / zermelo_chess::index::PAWNLESS_KING_PAIRS as u64;
    MIN_RESIDENT_KSLICES * kslice_resident_bytes(kslice)
}

/// [`paged_need`] for the compact solver ([`bits::solve_slice_bits`]): its fixed share is only
/// the threads' buffers (it keeps no summaries).
pub fn bits_paged_need(positions: u64, threads: usize, caller_per_thread: u64) -> PagedNeed {
    let per_thread = thread_bytes(positions, false) + caller_per_thread;
    let fixed = threads.max(1) as u64 * per_thread;
    PagedNeed {
        least: fixed + bits::bits_paged_least(positions),
        fixed,
    }
}

/// Values of positions outside the slice being solved.
pub trait Successors: Sync {
    /// The value, for the side to move, of a legal position reached by a move that leaves the
    /// slice (it may have an en-passant square).
    fn value_of(&self, pos: &Position) -> Result<Value, SolveError>;

    /// The values of a successor slice, readable by the table's index (the solver then reads
    /// exits by index, without building positions). `None` makes the solver ask
    /// [`Successors::value_of`] instead.
    fn slice_values(&self, _key: &SliceKey) -> Option<SliceValuesRef<'_>> {
        None
    }
}

/// A successor slice's values, read by index: an array in memory, or any source that reads
/// them on demand (a table file through a cache of blocks, say).
#[derive(Clone, Copy)]
pub enum SliceValuesRef<'a> {
    Array(&'a [u16]),
    /// A byte per index ([`CodedValues`]): half the memory of `Array`.
    Coded(&'a CodedValues),
    Indexed(&'a dyn IndexedValues),
}

/// A slice's values in a byte each: most slices hold far fewer than 256 distinct values (a
/// 4-man slice's longest mate is a few dozen plies), so each index keeps the number of its value
/// in the slice's list of values. Exactly the values it was made from.
pub struct CodedValues {
    codes: Vec<u8>,
    values: [u16; 256],
}

impl CodedValues {
    /// `values` coded, if they hold at most 256 distinct values.
    pub fn new(values: &[u16]) -> Option<CodedValues> {
        let mut seen = vec![0u64; 1 << 10];
        for &v in values {
            seen[v as usize / 64] |= 1 << (v % 64);
        }
        let distinct: usize = seen.iter().map(|w| w.count_ones() as usize).sum();
        if distinct > 256 {
            return None;
        }
        let mut table = [0u16; 256];
        let mut code = vec![0u8; 1 << 16];
        let mut k = 0;
        for (w, &bits) in seen.iter().enumerate() {
            let mut bits = bits;
            while bits != 0 {
                let v = w * 64 + bits.trailing_zeros() as usize;
                table[k] = v as u16;
                code[v] = k as u8;
                k += 1;
                bits &= bits - 1;
            }
        }
        Some(CodedValues {
            codes: values.iter().map(|&v| code[v as usize]).collect(),
            values: table,
        })
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    /// The value at `index`, 0 past the end.
    #[inline]
    pub fn get(&self, index: usize) -> u16 {
        self.codes.get(index).map_or(0, |&c| self.values[c as usize])
    }

    /// The values at `first..first + out.len()`, into `out`; 0 past the end.
    #[inline]
    pub fn get_run(&self, first: usize, out: &mut [u16]) {
        let start = first.min(self.codes.len());
        let have = (self.codes.len() - start).min(out.len());
        for (v, &c) in out[..have].iter_mut().zip(&self.codes[start..start + have]) {
            *v = self.values[c as usize];
        }
        out[have..].fill(0);
    }
}

/// Values of a slice read one at a time, by index.
pub trait IndexedValues: Sync {
    /// The raw value at `index`; an index past the end reads 0 (no position).
    fn get(&self, index: u64) -> Result<u16, SolveError>;

    /// The raw values at `first..first + out.len()`, into `out` (0 past the end): a source
    /// that reads by blocks looks each block up once.
    fn get_run(&self, first: u64, out: &mut [u16]) -> Result<(), SolveError> {
        for (i, v) in out.iter_mut().enumerate() {
            *v = self.get(first + i as u64)?;
        }
        Ok(())
    }

    /// The raw values at `indices`, into `out` (as long; 0 past the end): a source that reads
    /// by blocks looks a block up once for indices next to each other in it.
    fn get_many(&self, indices: &[u64], out: &mut [u16]) -> Result<(), SolveError> {
        for (v, &i) in out.iter_mut().zip(indices) {
            *v = self.get(i)?;
        }
        Ok(())
    }
}

impl SliceValuesRef<'_> {
    /// The raw value at `index`; an index past the end reads 0 (no position).
    #[inline]
    pub fn get(&self, index: u64) -> Result<u16, SolveError> {
        match self {
            SliceValuesRef::Array(values) => Ok(values.get(index as usize).copied().unwrap_or(0)),
            SliceValuesRef::Coded(values) => Ok(values.get(index as usize)),
            SliceValuesRef::Indexed(source) => source.get(index),
        }
    }

    /// The raw values at `indices`, into `out` (as long); 0 past the end.
    #[inline]
    pub fn get_many(&self, indices: &[u64], out: &mut [u16]) -> Result<(), SolveError> {
        match self {
            SliceValuesRef::Indexed(source) => source.get_many(indices, out),
            _ => {
                for (v, &i) in out.iter_mut().zip(indices) {
                    *v = self.get(i)?;
                }
                Ok(())
            }
        }
    }

    /// The raw values at `first..first + out.len()`, into `out`; 0 past the end.
    #[inline]
    pub fn get_run(&self, first: u64, out: &mut [u16]) -> Result<(), SolveError> {
        match self {
            SliceValuesRef::Array(values) => {
                let start = (first as usize).min(values.len());
                let have = (values.len() - start).min(out.len());
                out[..have].copy_from_slice(&values[start..start + have]);
                out[have..].fill(0);
                Ok(())
            }
            SliceValuesRef::Coded(values) => {
                values.get_run(first as usize, out);
                Ok(())
            }
            SliceValuesRef::Indexed(source) => source.get_run(first, out),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error("successor slice {0} is not available")]
    MissingSuccessor(SliceKey),
    #[error("successor slice {slice} holds no value at index {index}, a legal position; it is corrupt")]
    BadSuccessor { slice: SliceKey, index: u64 },
    /// A successor source failed (a table file that cannot be read, say): the source's error.
    #[error("reading successor values: {0}")]
    Source(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The sink of [`solve_slice_into`] refused the values (a table file that cannot be
    /// written, say): its error.
    #[error("writing the slice's values: {0}")]
    Output(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The temporary file of a large slice's plies (see `dtm_log`) could not be written or read.
    #[error("the solver's file of plies failed: {0}")]
    Scratch(#[source] std::io::Error),
    #[error("slice {0} has a mate distance over {MAX_PLIES} plies")]
    TooDeep(SliceKey),
    /// A checkpoint could not be written (see [`Checkpoints`]).
    #[error("writing the checkpoint {path}: {source}")]
    Checkpoint {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Stopped as [`Checkpoints::stop`] asked, after writing a checkpoint if the slice was past
    /// its init.
    #[error("stopped by request")]
    Interrupted,
    /// The parts of a slice solved in parts could not meet, or another part sent what does not
    /// fit this part's slice (see `parts`): nothing of it was used.
    #[error("the parts of the slice could not exchange: {0}")]
    Exchange(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Coded values read back exactly, one at a time and in runs (0 past the end), as the same
    /// values as an array; 257 distinct values are not coded.
    #[test]
    fn coded_values_read_as_the_values_they_were_made_from() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // 256 distinct values spread over the whole range, 0 and 0xffff among them.
        let palette: Vec<u16> = (0..256u32).map(|k| (k * 257) as u16).collect();
        let values: Vec<u16> = (0..100_003).map(|_| palette[(next() % 256) as usize]).collect();
        let coded = CodedValues::new(&values).expect("256 distinct values are coded");
        assert_eq!(coded.len(), values.len());
        let (a, c) = (SliceValuesRef::Array(&values), SliceValuesRef::Coded(&coded));
        for i in (0..values.len() as u64 + 5).step_by(7) {
            assert_eq!(c.get(i).unwrap(), a.get(i).unwrap(), "{i}");
        }
        for first in [0u64, 1, 999, 100_000, 100_003, 200_000] {
            let (mut x, mut y) = ([1u16; 64], [2u16; 64]);
            a.get_run(first, &mut x).unwrap();
            c.get_run(first, &mut y).unwrap();
            assert_eq!(x, y, "{first}");
        }
        assert_eq!(c.get(values.len() as u64).unwrap(), 0);
        let mut more = values.clone();
        more.push(1);
        assert!(CodedValues::new(&more).is_none(), "257 distinct values");
        assert!(CodedValues::new(&[]).is_some_and(|c| c.is_empty()));
    }
}
