//! A part of a slice solved by several workers meets the other parts through the coordinator's
//! `Meet` ([`AtCoordinator`], the solver's [`Exchange`] over gRPC), and what the parts give each
//! other travels as bytes: [`encode`] and the `decode_*` functions. Every decoding is total: any
//! bytes give a value or an error (never a panic, never more memory than a bound on the slice),
//! and what a decoded message says is then checked against the part's slice by the solver
//! ([`crate::solver::solve_part`]) before anything of it is used.
//!
//! A message is a tag byte and its body; the bodies of won words (streamed as they are emitted
//! and read) and won frontiers are zstd-compressed; the lines of predecessors come compressed
//! from the solver already, in chunks (`solver::split::encode_lines`: sorted, each line's first
//! index as the gap from the one before). The values a helper part gives the leader at the end
//! are compressed segment by segment, each on its own.

use std::io::{Read, Write};

use tokio::runtime::Handle;
use zermelo_proto as pb;

use super::Client;
use crate::solver::{Exchange, GiveWords, SolveError, TakeWords, SEG_INDICES};

/// Bytes of one `Meet` chunk (under gRPC's 4 MiB message limit).
const CHUNK_BYTES: usize = 1 << 20;
/// zstd level of the messages: the fastest (they are made and read once).
const LEVEL: i32 = 1;

const TAG_WON: u8 = 1;
const TAG_FRONTIER: u8 = 2;
const TAG_MARKS: u8 = 3;
const TAG_HORIZON: u8 = 4;
const TAG_VALUES: u8 = 5;

/// Won frontiers: `(segment, its log's encoding)`.
type Frontiers = Vec<(u32, Vec<u8>)>;

fn bad(what: impl Into<String>) -> SolveError {
    SolveError::Exchange(what.into())
}

/// A byte reader that fails rather than panics past the end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], SolveError> {
        if n > self.0.len() {
            return Err(bad("a message cut short"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u32(&mut self) -> Result<u32, SolveError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, SolveError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn compress(body: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(body, LEVEL).expect("zstd compresses into memory")
}

/// Decompresses at most `limit` bytes.
fn decompress(bytes: &[u8], limit: usize) -> Result<Vec<u8>, SolveError> {
    zstd::bulk::decompress(bytes, limit).map_err(|e| bad(format!("a message that does not decompress: {e}")))
}

/// The body of a message with tag `tag`, decompressed (at most `limit` bytes).
fn body(bytes: &[u8], tag: u8, limit: usize) -> Result<Vec<u8>, SolveError> {
    match bytes.split_first() {
        Some((&t, rest)) if t == tag => decompress(rest, limit),
        Some((&t, _)) => Err(bad(format!("a message of kind {t} where kind {tag} was due"))),
        None => Err(bad("an empty message")),
    }
}

/// The most bytes a message body about a slice of `n` positions decompresses to: its won
/// bits (n/8) or its lines of predecessors (at most n/64, 18 bytes each), with room.
fn body_limit(n: u64) -> usize {
    (n / 2 + (1 << 20)) as usize
}

/// Encodes the won words `give` emits for one part, compressed as they come (a part never
/// holds its won words twice).
pub(super) fn encode_won(give: impl FnOnce(&mut dyn FnMut(u64, &[u64]))) -> Vec<u8> {
    let mut z = zstd::stream::Encoder::new(vec![TAG_WON], LEVEL).expect("a zstd encoder");
    give(&mut |first, words| {
        let mut run = Vec::with_capacity(12 + 8 * words.len());
        run.extend_from_slice(&first.to_le_bytes());
        run.extend_from_slice(&(words.len() as u32).to_le_bytes());
        for w in words {
            run.extend_from_slice(&w.to_le_bytes());
        }
        z.write_all(&run).expect("zstd into memory");
    });
    z.finish().expect("zstd into memory")
}

/// Decodes won words for a slice of `n` positions as they decompress, handing each run to
/// `take` (a run is at most a segment's words; the whole at most [`body_limit`]).
pub(super) fn decode_won(bytes: &[u8], n: u64, take: &mut TakeWords<'_>) -> Result<(), SolveError> {
    let rest = match bytes.split_first() {
        Some((&TAG_WON, rest)) => rest,
        Some((&t, _)) => return Err(bad(format!("a message of kind {t} where kind {TAG_WON} was due"))),
        None => return Err(bad("an empty message")),
    };
    let decoder = zstd::stream::Decoder::with_buffer(rest)
        .map_err(|e| bad(format!("a message that does not decompress: {e}")))?;
    let mut r = decoder.take(body_limit(n) as u64);
    let broken = |e: std::io::Error| bad(format!("won words cut short or that do not decompress: {e}"));
    loop {
        let mut head = [0u8; 12];
        match r.read_exact(&mut head[..1]) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(broken(e)),
        }
        r.read_exact(&mut head[1..]).map_err(broken)?;
        let first = u64::from_le_bytes(head[..8].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(head[8..].try_into().expect("4 bytes")) as usize;
        if len > SEG_INDICES / 64 {
            return Err(bad(format!("a run of {len} won words")));
        }
        let mut raw = vec![0u8; 8 * len];
        r.read_exact(&mut raw).map_err(broken)?;
        let words: Vec<u64> = raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        take(first, &words)?;
    }
    if r.limit() == 0 {
        return Err(bad("won words past the bound of the slice"));
    }
    Ok(())
}

/// Encodes one message for one part.
pub(super) enum Message<'a> {
    Frontier(u64, &'a [(u32, Vec<u8>)]),
    Horizon(u32),
}

pub(super) fn encode(m: Message<'_>) -> Vec<u8> {
    let mut body = Vec::new();
    let tag = match m {
        Message::Frontier(joined, won) => {
            body.extend_from_slice(&joined.to_le_bytes());
            for (s, e) in won {
                body.extend_from_slice(&s.to_le_bytes());
                body.extend_from_slice(&(e.len() as u32).to_le_bytes());
                body.extend_from_slice(e);
            }
            TAG_FRONTIER
        }
        Message::Horizon(h) => return [&[TAG_HORIZON][..], &h.to_le_bytes()].concat(),
    };
    let mut out = vec![tag];
    out.extend_from_slice(&compress(&body));
    out
}

pub(super) fn decode_frontier(bytes: &[u8], n: u64) -> Result<(u64, Frontiers), SolveError> {
    let body = body(bytes, TAG_FRONTIER, body_limit(n))?;
    let mut r = Reader(&body);
    let joined = r.u64()?;
    let mut out = Vec::new();
    while !r.is_empty() {
        let s = r.u32()?;
        let len = r.u32()? as usize;
        out.push((s, r.take(len)?.to_vec()));
    }
    Ok((joined, out))
}

pub(super) fn decode_horizon(bytes: &[u8]) -> Result<u32, SolveError> {
    match bytes {
        [TAG_HORIZON, rest @ ..] if rest.len() == 4 => {
            Ok(u32::from_le_bytes(rest.try_into().expect("4 bytes")))
        }
        _ => Err(bad("a horizon that is not one")),
    }
}

/// Compresses one segment's values for a [`Spool`].
pub(super) fn compress_segment(values: &[u16]) -> Vec<u8> {
    let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    compress(&raw)
}

/// A part's compressed segments waiting in an unnamed file (of the cache folder) while its
/// state is still held, read back once it is gone, already encoded as the leader takes them
/// ([`decode_values`]): a tag, then for each segment its index, its length and its bytes.
pub(super) struct Spool {
    file: std::io::BufWriter<std::fs::File>,
}

impl Spool {
    /// An empty spool in `dir` (a file removed at once: nothing stays behind).
    pub(super) fn new(dir: &std::path::Path) -> std::io::Result<Spool> {
        use std::io::Write;
        std::fs::create_dir_all(dir)?;
        let mut file = std::io::BufWriter::new(tempfile::tempfile_in(dir)?);
        file.write_all(&[TAG_VALUES])?;
        Ok(Spool { file })
    }

    /// Adds segment `s`'s compressed values ([`compress_segment`]).
    pub(super) fn push(&mut self, s: u32, z: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let len = u32::try_from(z.len()).map_err(std::io::Error::other)?;
        self.file.write_all(&s.to_le_bytes())?;
        self.file.write_all(&len.to_le_bytes())?;
        self.file.write_all(z)
    }

    /// Every segment pushed, in order, encoded.
    pub(super) fn into_encoded(self) -> std::io::Result<Vec<u8>> {
        use std::io::{Read, Seek};
        let mut file = self.file.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        let mut out = Vec::new();
        file.read_to_end(&mut out)?;
        Ok(out)
    }
}

/// The segments of a part's values, each still compressed: `(segment, bytes)`.
pub(super) fn decode_values(bytes: &[u8]) -> Result<Vec<(u32, &[u8])>, SolveError> {
    let rest = match bytes.split_first() {
        Some((&TAG_VALUES, rest)) => rest,
        _ => return Err(bad("values that are not values")),
    };
    let mut r = Reader(rest);
    let mut out = Vec::new();
    while !r.is_empty() {
        let s = r.u32()?;
        let len = r.u32()? as usize;
        out.push((s, r.take(len)?));
    }
    Ok(out)
}

/// The values of segment `s` of a slice of `n` positions from their compressed bytes: exactly
/// the segment's length, or an error.
pub(super) fn segment_values(z: &[u8], s: usize, n: u64) -> Result<Vec<u16>, SolveError> {
    let first = s as u64 * SEG_INDICES as u64;
    let len = (n.saturating_sub(first)).min(SEG_INDICES as u64) as usize;
    let raw = decompress(z, 2 * len)?;
    if raw.len() != 2 * len {
        return Err(bad(format!(
            "segment {s} with {} values, not {len}",
            raw.len() / 2
        )));
    }
    Ok(raw
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect())
}

/// This part's side of the meetings of its group, through the coordinator: each call of the
/// solver's [`Exchange`] is one round of `Meet`, run on the worker's runtime from the solver's
/// (blocking) thread.
pub(super) struct AtCoordinator {
    pub(super) runtime: Handle,
    pub(super) client: Client,
    pub(super) worker_id: u64,
    pub(super) lease_id: u64,
    pub(super) parts: usize,
    pub(super) me: usize,
    /// Positions of the slice (the bound of what a message may hold).
    pub(super) n: u64,
    /// The next meeting.
    pub(super) round: u64,
    /// Bytes given and taken so far.
    pub(super) gave: u64,
    pub(super) took: u64,
}

impl AtCoordinator {
    /// One meeting: gives `gifts[k]` to part `k` (empty for this part) and returns what each
    /// part gave this one (empty for this part, and for a part that gave nothing).
    pub(super) fn meet(&mut self, gifts: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, SolveError> {
        debug_assert_eq!(gifts.len(), self.parts);
        let (parts, me, round) = (self.parts, self.me, self.round);
        self.gave += gifts
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != me)
            .map(|(_, g)| g.len() as u64)
            .sum::<u64>();
        let header = pb::MeetHeader {
            worker_id: self.worker_id,
            lease_id: self.lease_id,
            round,
        };
        // The header travels on a chunk of its own, addressed to another part.
        let first = pb::MeetChunk {
            header: Some(header),
            peer: ((me + 1) % parts) as u32,
            data: Vec::new(),
        };
        // Nothing goes to this part itself.
        let chunks = gifts
            .into_iter()
            .enumerate()
            .filter(move |&(k, _)| k != me)
            .flat_map(|(k, g)| {
                let count = g.len().div_ceil(CHUNK_BYTES);
                (0..count).map(move |i| pb::MeetChunk {
                    header: None,
                    peer: k as u32,
                    data: g[i * CHUNK_BYTES..((i + 1) * CHUNK_BYTES).min(g.len())].to_vec(),
                })
            });
        let request = tokio_stream::iter(std::iter::once(first).chain(chunks));
        let mut client = self.client.clone();
        // At most all of the slice's values, compressed at worst, from all the parts together.
        let limit = 4 * self.n + (64 << 20);
        let got = self.runtime.block_on(async move {
            let mut stream = client.meet(request).await?.into_inner();
            let mut got = vec![Vec::new(); parts];
            let mut total = 0u64;
            while let Some(c) = stream.message().await? {
                let from = c.peer as usize;
                total += c.data.len() as u64;
                if from >= parts || from == me || total > limit {
                    return Err(tonic::Status::data_loss(format!(
                        "an answer from part {from} of {parts} ({total} bytes)"
                    )));
                }
                got[from].extend_from_slice(&c.data);
            }
            Ok::<_, tonic::Status>(got)
        });
        let got = got.map_err(|s| bad(format!("meeting {round} of the parts: {}", s.message())))?;
        self.took += got.iter().map(|g| g.len() as u64).sum::<u64>();
        self.round += 1;
        Ok(got)
    }

    /// What every other part gave, decoded by `decode`.
    fn decoded_from_others<T>(
        &self,
        got: Vec<Vec<u8>>,
        mut decode: impl FnMut(&[u8]) -> Result<T, SolveError>,
    ) -> Result<Vec<T>, SolveError> {
        got.iter()
            .enumerate()
            .filter(|&(k, _)| k != self.me)
            .map(|(k, g)| decode(g).map_err(|e| bad(format!("from part {k}: {e}"))))
            .collect()
    }
}

impl Exchange for AtCoordinator {
    fn won_words(&mut self, give: &mut GiveWords<'_>, take: &mut TakeWords<'_>) -> Result<(), SolveError> {
        let me = self.me;
        let gifts = (0..self.parts)
            .map(|k| {
                if k == me {
                    Vec::new()
                } else {
                    encode_won(|emit| give(k, emit))
                }
            })
            .collect();
        let got = self.meet(gifts)?;
        for (k, g) in got.iter().enumerate().filter(|&(k, _)| k != me) {
            decode_won(g, self.n, take).map_err(|e| bad(format!("from part {k}: {e}")))?;
        }
        Ok(())
    }

    fn frontier(
        &mut self,
        _plies: u32,
        joined: u64,
        won: Vec<Vec<(u32, Vec<u8>)>>,
    ) -> Result<(u64, Vec<(u32, Vec<u8>)>), SolveError> {
        let gifts = won.iter().map(|w| encode(Message::Frontier(joined, w))).collect();
        let got = self.meet(gifts)?;
        let n = self.n;
        let mut total = joined;
        let mut theirs = Vec::new();
        for (j, mut w) in self.decoded_from_others(got, |b| decode_frontier(b, n))? {
            total = total.saturating_add(j);
            theirs.append(&mut w);
        }
        Ok((total, theirs))
    }

    fn marks(&mut self, _plies: u32, out: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, SolveError> {
        // The lines are compressed already, in chunks (the solver's `for_each_lines` reads
        // them): a tag in front, nothing more.
        let gifts = out
            .into_iter()
            .map(|chunks| [&[TAG_MARKS][..], &chunks].concat())
            .collect();
        let got = self.meet(gifts)?;
        self.decoded_from_others(got, |b| match b.split_first() {
            Some((&TAG_MARKS, rest)) => Ok(rest.to_vec()),
            _ => Err(bad("lines of predecessors that are not")),
        })
    }

    fn horizon(&mut self, _plies: u32, mine: u32) -> Result<u32, SolveError> {
        let gifts = (0..self.parts).map(|_| encode(Message::Horizon(mine))).collect();
        let got = self.meet(gifts)?;
        Ok(self
            .decoded_from_others(got, decode_horizon)?
            .into_iter()
            .fold(mine, u32::max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const N: u64 = 1 << 20;

    #[test]
    fn messages_round_trip() {
        let won = vec![(64u64, vec![1u64, 0, u64::MAX]), (1 << 20, vec![7])];
        let encoded = encode_won(|emit| {
            for (first, words) in &won {
                emit(*first, words);
            }
        });
        let mut back = Vec::new();
        decode_won(&encoded, N, &mut |first, words| {
            back.push((first, words.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(back, won);
        let fr = vec![(3u32, vec![0u8, 5, 9]), (4, vec![])];
        assert_eq!(
            decode_frontier(&encode(Message::Frontier(99, &fr)), N).unwrap(),
            (99, fr)
        );
        assert_eq!(decode_horizon(&encode(Message::Horizon(77))).unwrap(), 77);
        let values: Vec<u16> = (0..SEG_INDICES as u32).map(|i| (i % 300) as u16).collect();
        let dir = tempfile::tempdir().unwrap();
        let mut spool = Spool::new(dir.path()).unwrap();
        spool.push(2, &compress_segment(&values)).unwrap();
        let v = spool.into_encoded().unwrap();
        let segs = decode_values(&v).unwrap();
        assert_eq!(segs.len(), 1);
        assert_eq!(segs[0].0, 2);
        let n = 3 * SEG_INDICES as u64;
        assert_eq!(segment_values(segs[0].1, 2, n).unwrap(), values);
        // A segment of another length is refused.
        assert!(segment_values(segs[0].1, 2, n - 1).is_err());
    }

    proptest! {
        /// Any bytes, as any kind of message: a value or an error, never a panic.
        #[test]
        fn any_bytes_decode_without_a_panic(tag in 0u8..7, bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut m = vec![tag];
            m.extend_from_slice(&bytes);
            let _ = decode_won(&m, N, &mut |_, _| Ok(()));
            let _ = decode_frontier(&m, N);
            let _ = decode_horizon(&m);
            if let Ok(segs) = decode_values(&m) {
                for (s, z) in segs {
                    let _ = segment_values(z, s as usize, N);
                }
            }
            // The same bytes compressed, so that the body parsers see them too.
            let mut z = vec![tag];
            z.extend_from_slice(&compress(&bytes));
            let _ = decode_won(&z, N, &mut |_, _| Ok(()));
            let _ = decode_frontier(&z, N);
        }
    }
}
