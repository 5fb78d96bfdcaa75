//! One slice solved in parts: each part owns the K-slices of a band of king pairs (on both
//! sides to move) and keeps their state; the parts run every pass of a ply in step and pass
//! each other what crosses between them. This is how one slice is shared by several workers,
//! each holding its part (issue 35); [`solve_in_parts`] runs the parts in one process, each
//! with a state of its own, and is the same passes as [`super::retrograde`]'s, called with a
//! [`Split`], not a second solver.
//!
//! What crosses (a king move is the only move that leaves a K-slice, so a band's border is
//! crossed by king moves alone):
//! - after the init, each part's won bitmap (its illegal positions), to the parts whose
//!   positions have moves into it ([`Split::readers`]: the K-slices one king move away), which
//!   keep a copy of those won bits: the verification of a position reads the won bits of the
//!   positions its moves lead to, in its own part or not;
//! - after each scan of a won frontier (odd plies), the frontier of each part, as its log
//!   encodes it, to the same parts, which set those won bits in their copy;
//! - after each pass of un-moves, the lines of predecessors that another part owns, `(first
//!   index of the line, its squares)`, to that part, which marks them as its own un-moves would
//!   have ([`mark_lines`]: a mark does the same whatever the order, and however often);
//! - the frontier's size and each part's horizon (the largest ply assigned), so that every part
//!   runs the same passes.
//!
//! Nothing else is shared: every part inits, scans, marks and verifies its own positions, and
//! writes their values. The values are those of the slice solved whole.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Condvar, Mutex};

use zermelo_chess::index::{SliceIndexer, PAWNLESS_KING_PAIRS};
use zermelo_chess::slice::SliceKey;
use zermelo_chess::value::MAX_PLIES;

use super::dtm_log::{for_each_offset, DtmLog, SEG_INDICES};
use super::geometry::Geometry;
use super::paging::{Paging, Reach};
use super::retrograde::{
    init_state, mark_lines, scan_frontier, unmove_frontier, verify_changed, write_values, Context,
};
use super::split::{for_each_lines, Own, Split};
use super::state::{State, SPILL_FROM};
use super::{SolveError, Successors};

/// True if slice `key` can be solved in parts: pawnless, solved by lines of 64 (its lowest field
/// a lone man). Slices with pawns are small (a pawn configuration each) and go to a worker whole.
pub fn splittable(key: &SliceKey) -> bool {
    let g = Geometry::new(key);
    g.pawnless && g.line_man().is_some()
}

/// Bytes of the solver's state that part `me` of slice `key` cut into `parts` parts touches
/// (the arrays are the whole slice's, but their pages are mapped only as they are written): a
/// byte for each of its own positions, a bit for each position of the segments it owns or
/// reads the won bits of ([`Split::readers`]), the summaries whole (a byte per 64 positions),
/// and the log of plies when it is kept in memory (a small slice).
pub fn part_state_bytes(key: &SliceKey, parts: usize, me: usize) -> u64 {
    let (paged, held) = part_state_shares(key, parts, me);
    paged + held
}

/// [`part_state_bytes`] in two shares: what is paged when the part's state is
/// ([`solve_part`]'s `paging`: its bytes and won bits), and what stays in memory (the
/// summaries, the log of plies of a small slice).
pub fn part_state_shares(key: &SliceKey, parts: usize, me: usize) -> (u64, u64) {
    let ix = SliceIndexer::new(*key);
    let n = ix.size();
    let split = Split::new(&ix, parts, me);
    let len = |s: usize| (n - (s * SEG_INDICES) as u64).min(SEG_INDICES as u64);
    let segments = n.div_ceil(SEG_INDICES as u64) as usize;
    let own: u64 = split.segments().map(len).sum();
    let bits: u64 = (0..segments)
        .filter(|&s| split.owns(s * SEG_INDICES) || split.readers(s).contains(&(me as u16)))
        .map(len)
        .sum();
    let log = if (n as usize) < SPILL_FROM { own } else { 0 };
    (own + bits / 8, n / 64 + log)
}

/// What [`Exchange::won_words`] gives part `k`: `give(k, emit)` emits its runs of words.
pub type GiveWords<'a> = dyn FnMut(usize, &mut dyn FnMut(u64, &[u64])) + 'a;
/// What [`Exchange::won_words`] hands each run of words the others gave.
pub type TakeWords<'a> = dyn FnMut(u64, &[u64]) -> Result<(), SolveError> + 'a;

/// Where the parts of a slice meet: each call of a part returns once every part has made the
/// same call, with what the others sent it (see the module comment). In one process, threads
/// ([`solve_in_parts`]); in a cluster, the coordinator between workers.
pub trait Exchange {
    /// After the init: gives each other part `k` the won words it reads, `give(k, emit)`
    /// calling `emit(first word, words)` for each of this part's segments that part reads, and
    /// hands `take` each `(first word, words)` the others gave this part (it checks them against
    /// the part's slice: an error ends the meeting). Neither side need hold all the words at
    /// once: a part's won bits are an eighth of a byte a position, a third of its state.
    fn won_words(&mut self, give: &mut GiveWords<'_>, take: &mut TakeWords<'_>) -> Result<(), SolveError>;
    /// After the scan of ply `plies`: how many positions joined this part's frontier, and after
    /// a win (odd `plies`) its won frontier for each part (`won[k]` for part `k`), `(segment, its
    /// log's encoding)` for its segments that part reads and that have one; returns the size of
    /// the whole frontier and the won frontiers the others sent this part.
    fn frontier(
        &mut self,
        plies: u32,
        joined: u64,
        won: Vec<Vec<(u32, Vec<u8>)>>,
    ) -> Result<(u64, Vec<(u32, Vec<u8>)>), SolveError>;
    /// After the un-moves of ply `plies`: the lines of predecessors for each part (`out[k]` for
    /// part `k`; empty for this one); returns the lines the others sent this part.
    fn marks(&mut self, plies: u32, out: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, SolveError>;
    /// Before the pass of ply `plies`: the largest ply this part has assigned; returns the
    /// largest of all (the passes run up to it).
    fn horizon(&mut self, plies: u32, mine: u32) -> Result<u32, SolveError>;
}

/// A message of the other parts that does not fit this part's slice (a segment out of range or
/// its own, a line not its own): a peer is broken or lying, and nothing of it is used.
fn bad(what: String) -> SolveError {
    SolveError::Exchange(what)
}

/// Solves part `me` of slice `key` cut into `parts` parts ([`Split::new`]), meeting the other
/// parts through `exchange`, each pass on `threads` threads; hands `sink` the values of each of
/// its segments, `(segment, values)`, in index order. Returns the plies run. The values are
/// those of the slice solved whole, whatever the parts and the threads.
///
/// With `paging`, the part's state is paged through files of its folder as a whole slice's
/// is ([`State::of_paged`]), at most its `resident` bytes of them in memory, its marks counting
/// only the K-slices the part touches ([`Split::kslice_files`]): the same values.
pub fn solve_part(
    key: &SliceKey,
    succ: &dyn Successors,
    (parts, me): (usize, usize),
    threads: usize,
    paging: Option<&Paging>,
    exchange: &mut dyn Exchange,
    sink: &mut dyn FnMut(usize, &[u16]) -> Result<(), SolveError>,
) -> Result<u32, SolveError> {
    assert!(splittable(key), "slice {key} is not solved in parts");
    assert!(
        (1..=PAWNLESS_KING_PAIRS).contains(&parts) && me < parts,
        "part {me} of {parts}: a slice has 1 to {PAWNLESS_KING_PAIRS} parts"
    );
    let g = Geometry::new(key);
    let ctx = Context::new(&g, key, succ);
    let n = g.ix.size() as usize;
    let segments = n.div_ceil(SEG_INDICES);
    let split = Split::new(&g.ix, parts, me);

    // Init of this part's positions; its won bits (the illegal ones) to the others, and theirs.
    let mut st = State::of_paged(&g, paging, Some(split.kslice_files(&g.ix)))?;
    init_state(&ctx, &st, threads, &split, &|| false)?;
    st.track_won(threads, false, false, &split)?;
    let words = |s: usize| s * SEG_INDICES / 64..((s + 1) * SEG_INDICES).min(n) / 64;
    let mut give = |k: usize, emit: &mut dyn FnMut(u64, &[u64])| {
        let mut bits = Vec::new();
        for s in split
            .segments()
            .filter(|&s| split.readers(s).contains(&(k as u16)))
        {
            let w = words(s);
            st.mark(w.start * 64..w.end * 64, Reach::Own);
            bits.clear();
            bits.extend(w.clone().map(|w| st.won[w].load(Relaxed)));
            emit(w.start as u64, &bits);
        }
    };
    let mut take = |first: u64, bits: &[u64]| {
        let first = first as usize;
        let s = first * 64 / SEG_INDICES;
        if first * 64 % SEG_INDICES != 0
            || s >= segments
            || split.owns(first * 64)
            || !split.readers(s).contains(&(me as u16))
            || bits.len() != words(s).len()
        {
            return Err(bad(format!("won words of {} from word {first}", bits.len())));
        }
        st.mark(words(s).start * 64..words(s).end * 64, Reach::Own);
        for (w, &b) in words(s).zip(bits) {
            st.won[w].store(b, Relaxed);
        }
        Ok(())
    };
    exchange.won_words(&mut give, &mut take)?;

    // The passes, in step with the other parts.
    let mut log = DtmLog::new(n >= SPILL_FROM);
    let mut plies = 0u32;
    let mut encoded = Vec::new();
    while plies <= exchange.horizon(plies, st.horizon.load(Relaxed))? {
        if plies >= MAX_PLIES as u32 - 1 {
            return Err(SolveError::TooDeep(*key));
        }
        let joined = scan_frontier(&ctx, &st, &mut log, plies, threads, &split)?;
        let mut won = vec![Vec::new(); parts];
        if plies % 2 == 1 {
            for s in split.segments() {
                log.read_segment(plies, s, &mut encoded)
                    .map_err(SolveError::Scratch)?;
                if !encoded.is_empty() {
                    for &k in split.readers(s) {
                        won[k as usize].push((s as u32, encoded.clone()));
                    }
                }
            }
        }
        let (frontier, others) = exchange.frontier(plies, joined, won)?;
        for (s, encoding) in others {
            let s = s as usize;
            if s >= segments || split.owns(s * SEG_INDICES) {
                return Err(bad(format!("a won frontier of segment {s}")));
            }
            let end = ((s + 1) * SEG_INDICES).min(n);
            // The offsets are checked all before one is used.
            let mut outside = false;
            let whole = for_each_offset(&encoding, |o| outside |= o >= end - s * SEG_INDICES);
            if !whole || outside {
                return Err(bad(format!(
                    "a won frontier of segment {s} that is malformed or past its end"
                )));
            }
            st.mark(s * SEG_INDICES..end, Reach::Own);
            for_each_offset(&encoding, |o| {
                let i = s * SEG_INDICES + o;
                st.set_won_bits(i, 1 << (i % 64));
            });
        }
        let hold_won = unmove_frontier(&ctx, &st, &log, plies, frontier, threads, &split)?;
        let inbox = exchange.marks(plies, split.take_outbox())?;
        // A chunk at a time, each checked whole before it is marked (a bad one fails the part,
        // and its state with it: nothing of it reaches a value).
        for given in &inbox {
            for_each_lines(given, |lines| {
                if let Some(&(base, _)) = lines
                    .iter()
                    .find(|&&(base, _)| base % 64 != 0 || base as usize >= n || !split.owns(base as usize))
                {
                    return Err(bad(format!("a line of predecessors at index {base}")));
                }
                mark_lines(&st, plies, hold_won, lines, threads)
            })?;
        }
        if plies % 2 == 1 {
            verify_changed(&ctx, &st, plies, hold_won, threads)?;
        }
        plies += 1;
    }

    let mut mine = split.segments();
    write_values(st, &log, threads, &split, &mut |v| {
        sink(mine.next().expect("a segment of the part"), v)
    })?;
    Ok(plies)
}

/// What crossed between the parts of a slice solved by [`solve_in_parts`], in bytes as they
/// would travel (uncompressed), counted once for each part that receives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Crossed {
    /// The won bitmaps after the init (8 bytes a word).
    pub won_bytes: u64,
    /// The won frontiers, as their logs encode them.
    pub frontier_bytes: u64,
    /// The lines of predecessors marked by another part, in compressed chunks (a line 16
    /// bytes raw; see `split::encode_lines`).
    pub mark_bytes: u64,
    /// Passes (plies) run.
    pub plies: u32,
}

/// What one part gives at one meeting of [`Hub`].
#[derive(Clone)]
enum Given {
    Won(Vec<Vec<(u64, Vec<u64>)>>),
    Frontier(u64, Vec<Vec<(u32, Vec<u8>)>>),
    Marks(Vec<Vec<u8>>),
    Horizon(u32),
}

/// The meeting place of parts run as threads of one process: each meeting waits for every part
/// (or for one to fail: then every part fails).
struct Hub {
    meeting: Mutex<Meeting>,
    all_in: Condvar,
    crossed: Mutex<Crossed>,
}

#[derive(Default)]
struct Meeting {
    /// Meetings completed.
    round: u64,
    given: Vec<Option<Given>>,
    /// What each part takes away from the last completed meeting (all of it, cloned).
    taken: Vec<Given>,
    failed: bool,
}

impl Hub {
    fn new(parts: usize) -> Hub {
        Hub {
            meeting: Mutex::new(Meeting {
                given: vec![None; parts],
                ..Meeting::default()
            }),
            all_in: Condvar::new(),
            crossed: Mutex::default(),
        }
    }

    /// Gives `mine` as part `me`; returns what every part gave, once all have.
    fn meet(&self, me: usize, mine: Given) -> Result<Vec<Given>, SolveError> {
        let mut m = self.meeting.lock().expect("hub lock");
        if m.failed {
            return Err(bad("another part failed".into()));
        }
        m.given[me] = Some(mine);
        let round = m.round;
        if m.given.iter().all(Option::is_some) {
            m.taken = m.given.iter_mut().map(|g| g.take().expect("given")).collect();
            m.round += 1;
            self.all_in.notify_all();
        } else {
            m = self
                .all_in
                .wait_while(m, |m| m.round == round && !m.failed)
                .expect("hub lock");
            if m.failed {
                return Err(bad("another part failed".into()));
            }
        }
        Ok(m.taken.clone())
    }

    fn parts(&self) -> usize {
        self.meeting.lock().expect("hub lock").given.len()
    }

    fn fail(&self) {
        self.meeting.lock().expect("hub lock").failed = true;
        self.all_in.notify_all();
    }
}

/// Part `me`'s side of a [`Hub`].
struct AtHub<'h> {
    hub: &'h Hub,
    me: usize,
}

impl Exchange for AtHub<'_> {
    fn won_words(&mut self, give: &mut GiveWords<'_>, take: &mut TakeWords<'_>) -> Result<(), SolveError> {
        let mut out: Vec<Vec<(u64, Vec<u64>)>> = vec![Vec::new(); self.hub.parts()];
        for (k, runs) in out.iter_mut().enumerate().filter(|&(k, _)| k != self.me) {
            give(k, &mut |first, words| runs.push((first, words.to_vec())));
        }
        let words: usize = out.iter().flatten().map(|(_, w)| w.len()).sum();
        self.hub.crossed.lock().expect("crossed lock").won_bytes += 8 * words as u64;
        let all = self.hub.meet(self.me, Given::Won(out))?;
        for g in others(all, self.me) {
            let Given::Won(mut w) = g else {
                unreachable!("the parts meet in step")
            };
            for (first, words) in std::mem::take(&mut w[self.me]) {
                take(first, &words)?;
            }
        }
        Ok(())
    }

    fn frontier(
        &mut self,
        _plies: u32,
        joined: u64,
        won: Vec<Vec<(u32, Vec<u8>)>>,
    ) -> Result<(u64, Vec<(u32, Vec<u8>)>), SolveError> {
        let bytes: usize = won.iter().flatten().map(|(_, e)| e.len()).sum();
        self.hub.crossed.lock().expect("crossed lock").frontier_bytes += bytes as u64;
        let all = self.hub.meet(self.me, Given::Frontier(joined, won))?;
        let mut total = 0;
        let mut theirs = Vec::new();
        for (k, g) in all.into_iter().enumerate() {
            let Given::Frontier(j, mut w) = g else {
                unreachable!("the parts meet in step")
            };
            total += j;
            if k != self.me {
                theirs.append(&mut w[self.me]);
            }
        }
        Ok((total, theirs))
    }

    fn marks(&mut self, _plies: u32, out: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, SolveError> {
        let bytes: usize = out.iter().map(Vec::len).sum();
        self.hub.crossed.lock().expect("crossed lock").mark_bytes += bytes as u64;
        let all = self.hub.meet(self.me, Given::Marks(out))?;
        Ok(others(all, self.me)
            .map(|g| match g {
                Given::Marks(mut m) => std::mem::take(&mut m[self.me]),
                _ => unreachable!("the parts meet in step"),
            })
            .collect())
    }

    fn horizon(&mut self, _plies: u32, mine: u32) -> Result<u32, SolveError> {
        let all = self.hub.meet(self.me, Given::Horizon(mine))?;
        let top = all
            .into_iter()
            .map(|g| match g {
                Given::Horizon(h) => h,
                _ => unreachable!("the parts meet in step"),
            })
            .max()
            .unwrap_or(0);
        Ok(top)
    }
}

/// What the parts other than `me` gave.
fn others(all: Vec<Given>, me: usize) -> impl Iterator<Item = Given> {
    all.into_iter()
        .enumerate()
        .filter(move |&(k, _)| k != me)
        .map(|(_, g)| g)
}

/// Solves slice `key` (pawnless, [`splittable`]) as `parts` parts, each a thread of this process
/// with a state of its own ([`solve_part`]) meeting the others only through an [`Exchange`],
/// each part's passes on `threads` threads; hands its values to `sink` in index order, as
/// [`super::solve_slice_into`] does: the same values. Returns what crossed between the parts.
/// With `paging`, each part pages its state ([`solve_part`]) in its folder, the parts sharing
/// its `resident` bytes equally.
pub fn solve_in_parts(
    key: &SliceKey,
    succ: &dyn Successors,
    parts: usize,
    threads: usize,
    paging: Option<&Paging>,
    sink: &mut dyn FnMut(&[u16]) -> Result<(), SolveError>,
) -> Result<Crossed, SolveError> {
    let ix = SliceIndexer::new(*key);
    let n = ix.size() as usize;
    let parts = parts.clamp(1, PAWNLESS_KING_PAIRS);
    let hub = Hub::new(parts);
    let paging = paging.map(|p| Paging {
        dir: p.dir.clone(),
        resident: p.resident / parts as u64,
    });
    let values: Mutex<Vec<Option<Vec<u16>>>> = Mutex::new(vec![None; n.div_ceil(SEG_INDICES)]);
    let results: Vec<Result<u32, SolveError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..parts)
            .map(|me| {
                let (hub, values, paging) = (&hub, &values, paging.as_ref());
                scope.spawn(move || {
                    let mut at = AtHub { hub, me };
                    let solved = solve_part(key, succ, (parts, me), threads, paging, &mut at, &mut |s, v| {
                        values.lock().expect("values lock")[s] = Some(v.to_vec());
                        Ok(())
                    });
                    if solved.is_err() {
                        hub.fail();
                    }
                    solved
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a part panicked"))
            .collect()
    });
    // The first failure that is not another part's failing.
    let mut plies = 0;
    let mut failure = None;
    for r in results {
        match r {
            Ok(p) => plies = p,
            Err(SolveError::Exchange(_)) if failure.is_some() => {}
            Err(e @ SolveError::Exchange(_)) => failure = Some(e),
            Err(e) => {
                failure = match failure {
                    Some(SolveError::Exchange(_)) | None => Some(e),
                    f => f,
                }
            }
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    for v in values.into_inner().expect("values lock") {
        sink(&v.expect("every segment has its part"))?;
    }
    let mut crossed = hub.crossed.into_inner().expect("crossed lock");
    crossed.plies = plies;
    Ok(crossed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::solver::retrograde::solve_slice;
    use crate::solver::retrograde::tests::solve_into;
    use crate::tables::SliceMap;
    use zermelo_chess::Material;

    /// A slice solved in 2, 3 and 7 parts, on 1 and 2 threads, has the values of the slice
    /// solved whole, and something crossed between the parts (won bits, frontiers and marks).
    /// KRvKN, KQvKR (captures into other tables both ways, a long mate), KBNvK (mates only in
    /// the corners of the bishop's colour: long lines across every band).
    #[test]
    fn a_slice_solved_in_parts_has_the_values_of_the_slice_solved_whole() {
        let mut map = SliceMap::new();
        for m in ["KRvKN", "KQvKR", "KBNvK"] {
            let key = SliceKey::pawnless(m.parse::<Material>().unwrap());
            for s in key.successors() {
                solve_into(s, &mut map);
            }
            assert!(splittable(&key));
            let whole = solve_slice(&key, &map, 2).unwrap();
            for (parts, threads) in [(2, 1), (3, 2), (7, 2)] {
                let mut values = Vec::new();
                let crossed = solve_in_parts(&key, &map, parts, threads, None, &mut |v| {
                    values.extend_from_slice(v);
                    Ok(())
                })
                .unwrap();
                assert_eq!(values.len(), whole.len(), "{m} in {parts} parts");
                let wrong = values.iter().zip(&whole).filter(|(a, b)| a != b).count();
                assert_eq!(
                    wrong, 0,
                    "{m} in {parts} parts on {threads} threads: {wrong} values differ"
                );
                assert!(
                    crossed.won_bytes > 0 && crossed.frontier_bytes > 0 && crossed.mark_bytes > 0,
                    "{m} in {parts} parts: {crossed:?}"
                );
            }
        }
    }

    /// Parts whose states are paged, each with room for a handful of K-slices (evicted while
    /// in use, read back from their files), get the values of the slice solved whole; each part's
    /// marks count every file of its own K-slices, the won bitmap only of those it reads, and
    /// nothing of the rest.
    #[test]
    fn paged_parts_get_the_values_of_the_slice_solved_whole() {
        let mut map = SliceMap::new();
        let key = SliceKey::pawnless("KRvKN".parse::<Material>().unwrap());
        for s in key.successors() {
            solve_into(s, &mut map);
        }
        let whole = solve_slice(&key, &map, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let paging = Paging {
            dir: dir.path().to_path_buf(),
            resident: 3 * 32 * 4096,
        };
        for threads in [1, 2] {
            let before = crate::solver::paging::evictions();
            let mut values = Vec::new();
            solve_in_parts(&key, &map, 3, threads, Some(&paging), &mut |v| {
                values.extend_from_slice(v);
                Ok(())
            })
            .unwrap();
            assert!(
                crate::solver::paging::evictions() > before + 1000,
                "hardly any evictions"
            );
            assert!(
                values == whole,
                "3 parts paged on {threads} thread(s): other values"
            );
        }
        // Half the state's budget shared by the parts (a window of a sixteenth: these
        // K-slices are small): most of it pinned, the rest paged.
        let n = SliceIndexer::new(key).size();
        let half = Paging {
            dir: dir.path().to_path_buf(),
            resident: (n + n / 8) / 2,
        };
        let (pinned, evicted) = (
            crate::solver::paging::pinned(),
            crate::solver::paging::evictions(),
        );
        let mut values = Vec::new();
        crate::solver::paging::SMALL_WINDOW.store(true, Relaxed);
        let r = solve_in_parts(&key, &map, 3, 2, Some(&half), &mut |v| {
            values.extend_from_slice(v);
            Ok(())
        });
        crate::solver::paging::SMALL_WINDOW.store(false, Relaxed);
        r.unwrap();
        assert!(
            crate::solver::paging::pinned() > pinned + n / 4,
            "hardly anything pinned"
        );
        assert!(crate::solver::paging::evictions() > evicted, "no evictions");
        assert!(values == whole, "3 parts pinned and paged: other values");
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "a paged file left"
        );

        let ix = SliceIndexer::new(key);
        let files: Vec<Vec<u32>> = (0..3)
            .map(|me| Split::new(&ix, 3, me).kslice_files(&ix))
            .collect();
        use crate::solver::paging::{ALL_FILES, WON_FILE};
        for k in 0..2 * PAWNLESS_KING_PAIRS {
            let owners = files.iter().filter(|f| f[k] == ALL_FILES).count();
            assert!((1..=2).contains(&owners), "K-slice {k}: {owners} owners");
            assert!(files.iter().all(|f| [0, WON_FILE, ALL_FILES].contains(&f[k])));
        }
        for (me, f) in files.iter().enumerate() {
            let count = |m: u32| f.iter().filter(|&&x| x == m).count();
            assert!(
                count(ALL_FILES) < 2 * PAWNLESS_KING_PAIRS / 2 && count(WON_FILE) > 0 && count(0) > 0,
                "part {me}: {} own, {} read, {} untouched",
                count(ALL_FILES),
                count(WON_FILE),
                count(0)
            );
        }
    }

    /// A part touches a byte of its own positions and the won bits of what it owns or reads:
    /// in one part, the whole slice's state; in three, each part less, and a third of the bytes
    /// each in all.
    #[test]
    fn a_part_touches_less_state_than_the_whole_slice() {
        let key = SliceKey::pawnless("KRvKN".parse::<Material>().unwrap());
        let n = SliceIndexer::new(key).size();
        assert_eq!(
            part_state_bytes(&key, 1, 0),
            crate::solver::slice_state_bytes(n, false)
        );
        let parts: Vec<u64> = (0..3).map(|me| part_state_bytes(&key, 3, me)).collect();
        let whole = part_state_bytes(&key, 1, 0);
        assert!(parts.iter().all(|&p| p < whole), "{parts:?} of {whole}");
        // The bytes are shared out (the log of plies is in a file at this size in this crate's
        // tests); the summaries are not, nor the bits of the segments read.
        assert!(n as usize >= SPILL_FROM);
        let shared = parts.iter().sum::<u64>() - 3 * (n / 64);
        assert!(shared >= n + n / 8 && shared < n + 3 * n / 8, "{shared} of {n}");
    }

    /// A part that is sent a line of predecessors it does not own (a broken or lying peer)
    /// fails with what was wrong and uses nothing of it; the other part is told and fails too,
    /// instead of waiting for ever.
    #[test]
    fn a_part_sent_what_is_not_its_own_fails_and_so_does_the_other() {
        struct Liar<'h>(AtHub<'h>);
        impl Exchange for Liar<'_> {
            fn won_words(
                &mut self,
                give: &mut GiveWords<'_>,
                take: &mut TakeWords<'_>,
            ) -> Result<(), SolveError> {
                self.0.won_words(give, take)
            }
            fn frontier(
                &mut self,
                plies: u32,
                joined: u64,
                won: Vec<Vec<(u32, Vec<u8>)>>,
            ) -> Result<(u64, Vec<(u32, Vec<u8>)>), SolveError> {
                self.0.frontier(plies, joined, won)
            }
            fn marks(&mut self, plies: u32, out: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, SolveError> {
                let mut inbox = self.0.marks(plies, out)?;
                // Index 0 is part 0's: part 1 is told to mark it.
                crate::solver::split::encode_lines(&mut [(0, 1)], &mut inbox[0]);
                Ok(inbox)
            }
            fn horizon(&mut self, plies: u32, mine: u32) -> Result<u32, SolveError> {
                self.0.horizon(plies, mine)
            }
        }
        let mut map = SliceMap::new();
        let key = SliceKey::pawnless("KRvKN".parse::<Material>().unwrap());
        for s in key.successors() {
            solve_into(s, &mut map);
        }
        let hub = Hub::new(2);
        let results: Vec<Result<u32, SolveError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|me| {
                    let (hub, map) = (&hub, &map);
                    scope.spawn(move || {
                        let at = AtHub { hub, me };
                        let mut liar;
                        let mut honest;
                        let exchange: &mut dyn Exchange = if me == 1 {
                            liar = Liar(at);
                            &mut liar
                        } else {
                            honest = at;
                            &mut honest
                        };
                        let r = solve_part(&key, map, (2, me), 1, None, exchange, &mut |_, _| Ok(()));
                        if r.is_err() {
                            hub.fail();
                        }
                        r
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        match &results[1] {
            Err(SolveError::Exchange(why)) => {
                assert!(why.contains("line of predecessors at index 0"), "{why}")
            }
            r => panic!("the lied-to part: {r:?}"),
        }
        match &results[0] {
            Err(SolveError::Exchange(why)) => assert!(why.contains("another part failed"), "{why}"),
            r => panic!("the other part: {r:?}"),
        }
    }
}
