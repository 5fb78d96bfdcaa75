//! `zermelo materials`: every table of a directory at a glance. For each material: wins, draws
//! and losses for both sides to move and the longest mate (exact, counted as `stats` counts),
//! the materials its captures and promotions lead into, and how often a best move takes one of
//! those conversions (read off a fixed random sample of the table's positions).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;
use zermelo_chess::index::SliceIndexer;
use zermelo_chess::position::Move;
use zermelo_chess::probe;
use zermelo_chess::slice::SliceKey;
use zermelo_chess::{Bitboard, Color, Material, Position, Role, Value};
use zermelo_worker::tables::{read_cached, TableDir, TableError, ThreadCached};

use crate::stats::{stats, weight, Stats};
use crate::MAX_MEN;

/// The summary of one material.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The exact counts, both sides to move (as `zermelo stats` prints them).
    pub stats: Stats,
    pub men: u32,
    /// The share of drawn positions over both sides to move: draws / legal positions.
    pub draw_share: f64,
    /// Every material one capture or promotion leads into, each once.
    pub conversions: Vec<Conversion>,
    /// What the best moves of a sample of positions do (absent with `--sample 0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_moves: Option<BestMoves>,
}

/// A material a move of one side leads into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Conversion {
    /// The material after the move, in its table orientation (`KvK` for bare kings).
    pub into: String,
    /// The side that moves: "white" or "black".
    pub side: &'static str,
    /// "capture", "promotion" or "promotion with capture".
    pub by: &'static str,
    /// The men concerned: "xR" (takes a rook), "P=Q", "P=QxR".
    pub what: String,
}

/// What the best moves do in a sample of positions drawn at random from the whole board,
/// weighted as the counts are (each legal position of the whole board equally likely), either
/// side to move. The same seed for a material every run: the same sample, the same shares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BestMoves {
    pub sampled: u64,
    /// Sampled positions won for the side to move.
    pub won: u64,
    /// Of them, those where a fastest mate starts with a capture or a promotion (some move that
    /// mates soonest is one).
    pub won_converting: u64,
    /// Where those lead: the material after the first such move in UCI order, and how often.
    pub won_into: BTreeMap<String, u64>,
    /// Sampled positions drawn.
    pub drawn: u64,
    /// Of them, those where a capture or a promotion keeps the draw.
    pub drawn_converting: u64,
    /// Where those lead, as `won_into`.
    pub drawn_into: BTreeMap<String, u64>,
}

/// Why a summary could not be made.
#[derive(Debug, thiserror::Error)]
pub enum MaterialsError {
    #[error("{material}: {source}")]
    Table { material: String, source: TableError },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
}

/// The normalized name of a material, `KvK` for bare kings.
fn name(m: &Material) -> String {
    m.normalized().0.to_string()
}

fn side_name(c: Color) -> &'static str {
    match c {
        Color::White => "white",
        Color::Black => "black",
    }
}

/// The roles a man can be taken as or promote to.
const PIECES: [Role; 4] = [Role::Queen, Role::Rook, Role::Bishop, Role::Knight];

/// Every material one capture or promotion of `m` leads into, White's moves first.
pub fn conversions(m: &Material) -> Vec<Conversion> {
    let mut out = Vec::new();
    for c in [Color::White, Color::Black] {
        let them = c.other();
        for r in PIECES.into_iter().chain([Role::Pawn]) {
            if m.count(them, r) > 0 {
                out.push(Conversion {
                    into: name(&m.without(them, r)),
                    side: side_name(c),
                    by: "capture",
                    what: format!("x{}", r.upper()),
                });
            }
        }
        if m.count(c, Role::Pawn) == 0 {
            continue;
        }
        for p in PIECES {
            let promoted = m.without(c, Role::Pawn).with(c, p);
            out.push(Conversion {
                into: name(&promoted),
                side: side_name(c),
                by: "promotion",
                what: format!("P={}", p.upper()),
            });
            for r in PIECES {
                if m.count(them, r) > 0 {
                    out.push(Conversion {
                        into: name(&promoted.without(them, r)),
                        side: side_name(c),
                        by: "promotion with capture",
                        what: format!("P={}x{}", p.upper(), r.upper()),
                    });
                }
            }
        }
    }
    out
}

/// The complete tables of the directories, each material once (the first directory holding it
/// wins), fewer men first, then by name.
pub fn tables_in(dirs: &[PathBuf]) -> Result<Vec<Material>, MaterialsError> {
    let mut found = Vec::new();
    for dir in dirs {
        let entries = std::fs::read_dir(dir).map_err(|source| MaterialsError::Io {
            path: dir.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let Some(stem) = file.strip_suffix(".zmt") else {
                continue;
            };
            // Only a table named as `solve` names it (not a temporary or a foreign file).
            match Material::parse_table(stem, MAX_MEN) {
                Ok(m) if m.to_string() == stem => found.push(m),
                _ => {}
            }
        }
    }
    found.sort_by_cached_key(|m| (m.men(), m.to_string()));
    found.dedup();
    Ok(found)
}

/// A small, fast generator (splitmix64) of the sample, and of the tests' random positions: the
/// same seed, the same numbers.
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by 128-bit multiply (bias below 2^-64 n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

/// The seed of a material's sample: FNV-1a of its name.
fn seed(m: &Material) -> u64 {
    m.to_string().bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// True if `mv` changes the material: a capture or a promotion.
fn converts(mv: &Move) -> bool {
    mv.capture.is_some() || mv.promotion.is_some()
}

/// Reads the best moves of `sample` positions of `m`'s table drawn at random, each legal
/// position of the whole board equally likely (a stored index drawn uniformly, then kept with
/// a chance in proportion to the real positions it stands for). Successor tables are read from
/// `tables`.
pub fn best_moves(tables: &TableDir, m: &Material, sample: u64) -> Result<BestMoves, TableError> {
    let table = tables.table(m)?;
    let slices: Vec<SliceIndexer> = table
        .slices()
        .iter()
        .map(|e| {
            SliceIndexer::new(SliceKey {
                material: *m,
                white_pawns: Bitboard(e.key[0]),
                black_pawns: Bitboard(e.key[1]),
            })
        })
        .collect();
    // Where each slice starts among all stored indices.
    let mut starts = Vec::with_capacity(slices.len());
    let mut total = 0u64;
    for ix in &slices {
        starts.push(total);
        total += ix.size();
    }
    // The most real positions an index stands for: 8 without pawns, 2 with.
    let most = if m.has_pawns() { 2 } else { 8 };
    let src = ThreadCached(tables);
    let mut rng = SplitMix(seed(m));
    let mut out = BestMoves::default();
    // Bounded: a table of illegal indices only (none is) could not stall the command.
    let mut tries = 0u64;
    while out.sampled < sample && tries < sample.saturating_mul(1000) {
        tries += 1;
        let at = rng.below(total);
        let s = starts.partition_point(|&st| st <= at) - 1;
        let (ix, index) = (&slices[s], at - starts[s]);
        let raw = read_cached(&table, s, index).map_err(TableError::from)?;
        if raw == 0 || rng.below(most) >= weight(ix, index) {
            continue; // Illegal, or standing for fewer real positions than the most.
        }
        let (Some(pos), Some(value)) = (ix.position(index), Value::from_raw(raw)) else {
            continue;
        };
        out.sampled += 1;
        tally(&pos, value, &src, &mut out)?;
    }
    Ok(out)
}

/// Adds to `out` the best moves of `pos`, whose stored value is `value`.
fn tally(pos: &Position, value: Value, src: &ThreadCached, out: &mut BestMoves) -> Result<(), TableError> {
    if let Value::Loss(_) = value {
        return Ok(()); // Only the winner's and a drawn position's moves are counted.
    }
    // Best first, ties in UCI order: the first converting move of a group is its first in UCI.
    let moves = probe::moves(pos, src)?;
    let into = |mv: &Move| name(&Material::of(&pos.play(mv).board));
    if let Value::Win(_) = value {
        out.won += 1;
        // The fastest mates are the moves worth what the first is.
        let best = moves.first().map(|b| b.1);
        let first = moves
            .iter()
            .take_while(|(_, v)| Some(*v) == best)
            .find(|(mv, _)| converts(mv));
        if let Some((mv, _)) = first {
            out.won_converting += 1;
            *out.won_into.entry(into(mv)).or_default() += 1;
        }
    } else {
        out.drawn += 1;
        if let Some((mv, _)) = moves.iter().find(|(mv, v)| converts(mv) && *v == Value::Draw) {
            out.drawn_converting += 1;
            *out.drawn_into.entry(into(mv)).or_default() += 1;
        }
    }
    Ok(())
}

/// The summary of one material: exact counts, conversions, and a sample of `sample` positions'
/// best moves (none if 0).
pub fn summary(tables: &TableDir, m: &Material, sample: u64) -> Result<Summary, TableError> {
    let stats = stats(tables, m)?;
    let legal = stats.white.legal + stats.black.legal;
    let draws = stats.white.draw + stats.black.draw;
    let best_moves = match sample {
        0 => None,
        n => Some(best_moves(tables, m, n)?),
    };
    Ok(Summary {
        men: m.men(),
        draw_share: if legal == 0 {
            0.0
        } else {
            draws as f64 / legal as f64
        },
        conversions: conversions(m),
        best_moves,
        stats,
    })
}

/// The summaries of `materials`, on `threads` threads (each material on one; the results do not
/// depend on how many), calling `report(done, total)` as materials finish.
pub fn summaries(
    tables: &TableDir,
    materials: &[Material],
    sample: u64,
    threads: usize,
    report: &(dyn Fn(u64, u64) + Sync),
) -> Result<Vec<Summary>, MaterialsError> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Summary, MaterialsError>>>> =
        Mutex::new((0..materials.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(materials.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(m) = materials.get(i) else { break };
                let r = summary(tables, m, sample).map_err(|source| MaterialsError::Table {
                    material: m.to_string(),
                    source,
                });
                // Unmapped once read whole: the pages read stay out of the process's memory
                // (a material read again as another's successor is opened again).
                tables.forget(m);
                let failed = r.is_err();
                results.lock().expect("no thread panics holding it")[i] = Some(r);
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                report(d as u64, materials.len() as u64);
                if failed {
                    // Stop taking materials: the command fails with the first error.
                    next.store(materials.len(), Ordering::Relaxed);
                }
            });
        }
    });
    // Materials are taken in order, so a material never taken (None) comes after the one that
    // failed, whose error is met first.
    let mut out = Vec::with_capacity(materials.len());
    for r in results
        .into_inner()
        .expect("no thread panicked")
        .into_iter()
        .flatten()
    {
        out.push(r?);
    }
    Ok(out)
}

/// A percentage with one decimal.
fn pc(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_string()
    } else {
        format!("{:.1}", 100.0 * part as f64 / whole as f64)
    }
}

/// The summaries as a text table, a line a material.
pub fn text_table(summaries: &[Summary]) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "{:<10} {:>5} {:>5} {:>5}  {:>5} {:>5} {:>5}  {:>5}  {:>6}  {:>6}  {}\n",
        "material",
        "w-win",
        "draw",
        "loss",
        "b-win",
        "draw",
        "loss",
        "plies",
        "won/cv",
        "drn/cv",
        "best conversion"
    ));
    for m in summaries {
        let (w, b) = (&m.stats.white, &m.stats.black);
        let (won_cv, drawn_cv, top) = match &m.best_moves {
            Some(bm) => (
                pc(bm.won_converting, bm.won),
                pc(bm.drawn_converting, bm.drawn),
                bm.won_into
                    .iter()
                    .max_by_key(|(into, n)| (**n, std::cmp::Reverse(*into)))
                    .map(|(into, n)| format!("{into} ({})", pc(*n, bm.won)))
                    .unwrap_or_default(),
            ),
            None => ("-".into(), "-".into(), String::new()),
        };
        s.push_str(&format!(
            "{:<10} {:>5} {:>5} {:>5}  {:>5} {:>5} {:>5}  {:>5}  {:>6}  {:>6}  {}\n",
            m.stats.material,
            pc(w.win, w.legal),
            pc(w.draw, w.legal),
            pc(w.loss, w.legal),
            pc(b.win, b.legal),
            pc(b.draw, b.legal),
            pc(b.loss, b.legal),
            w.max_dtm.max(b.max_dtm),
            won_cv,
            drawn_cv,
            top
        ));
    }
    s
}
