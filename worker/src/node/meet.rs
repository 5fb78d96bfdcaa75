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
use zermelo_proto::CHUNK_BYTES;

use super::Client;
use crate::solver::{Exchange, GiveWords, SolveError, TakeWords, SEG_INDICES};

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

    /// The file, rewound: every segment pushed, in order, encoded.
    pub(super) fn into_file(self) -> std::io::Result<std::fs::File> {
        use std::io::Seek;
        let mut file = self.file.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        Ok(file)
    }
}

/// The most bytes a segment's compressed values may take: zstd's bound on 2 bytes a value.
fn max_segment_bytes() -> u64 {
    zstd::zstd_safe::compress_bound(2 * SEG_INDICES) as u64
}

/// The segments of a part's values as a [`Spool`] encodes them, read from `r` (of `len`
/// bytes) without holding them: `(segment, offset of its bytes, their length)`.
fn index_values(r: &mut impl Read, len: u64) -> Result<Vec<(u32, u64, u32)>, SolveError> {
    let cut = |e: std::io::Error| bad(format!("values cut short: {e}"));
    let mut tag = [0u8];
    if len == 0 || r.read_exact(&mut tag).is_err() || tag[0] != TAG_VALUES {
        return Err(bad("values that are not values"));
    }
    let mut at = 1u64;
    let mut out = Vec::new();
    while at < len {
        let mut head = [0u8; 8];
        r.read_exact(&mut head).map_err(cut)?;
        let s = u32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
        let z = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        at += 8;
        if u64::from(z) > max_segment_bytes() || at + u64::from(z) > len {
            return Err(bad(format!(
                "segment {s} of {z} bytes, past the end or the bound"
            )));
        }
        out.push((s, at, z));
        std::io::copy(&mut r.take(u64::from(z)), &mut std::io::sink()).map_err(cut)?;
        at += u64::from(z);
    }
    Ok(out)
}

/// A slice's values as its parts gave them, each part's in a file ([`Spool`]'s encoding), found
/// segment by segment: the leader writes the slice from them a segment at a time, never holding
/// them all (KRNvKNN's are 1.9 GB).
pub(super) struct PartValues {
    files: Vec<std::fs::File>,
    /// Per segment: (file, offset, length) of its compressed bytes.
    at: Vec<Option<(usize, u64, u32)>>,
}

impl PartValues {
    /// None yet, for a slice of `segments` segments.
    pub(super) fn new(segments: usize) -> PartValues {
        PartValues {
            files: Vec::new(),
            at: vec![None; segments],
        }
    }

    /// Part `k`'s values in `file` (from its start): every segment in range and given once.
    pub(super) fn add(&mut self, k: usize, mut file: std::fs::File) -> Result<(), SolveError> {
        use std::io::Seek;
        let from = |e: SolveError| bad(format!("the values of part {k}: {e}"));
        let len = file.metadata().map_err(SolveError::Scratch)?.len();
        file.rewind().map_err(SolveError::Scratch)?;
        let segments = index_values(&mut std::io::BufReader::new(&mut file), len).map_err(from)?;
        let f = self.files.len();
        let count = self.at.len();
        for (s, offset, z) in segments {
            match self.at.get_mut(s as usize) {
                Some(slot @ None) => *slot = Some((f, offset, z)),
                _ => return Err(from(bad(format!("segment {s} of {count}, or given twice")))),
            }
        }
        self.files.push(file);
        Ok(())
    }

    /// Every segment given, or an error naming the first that was not.
    pub(super) fn check_complete(&self) -> Result<(), SolveError> {
        match self.at.iter().position(Option::is_none) {
            Some(s) => Err(bad(format!("no part gave the values of segment {s}"))),
            None => Ok(()),
        }
    }

    /// The values of segment `s` of a slice of `n` positions (every segment must have been
    /// given).
    pub(super) fn segment(&self, s: usize, n: u64) -> Result<Vec<u16>, SolveError> {
        use std::os::unix::fs::FileExt;
        let Some((f, offset, z)) = self.at[s] else {
            return Err(bad(format!("no part gave the values of segment {s}")));
        };
        let mut bytes = vec![0u8; z as usize];
        self.files[f]
            .read_exact_at(&mut bytes, offset)
            .map_err(SolveError::Scratch)?;
        segment_values(&bytes, s, n)
    }
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

/// What a part gives another at a meeting: bytes, or the whole of a file from where it stands
/// (read a chunk at a time as it is sent).
enum Gift {
    Bytes(Vec<u8>),
    File(std::fs::File),
}

impl Gift {
    fn len(&self) -> std::io::Result<u64> {
        Ok(match self {
            Gift::Bytes(b) => b.len() as u64,
            Gift::File(f) => {
                use std::io::Seek;
                let mut f = f;
                let at = f.stream_position()?;
                f.metadata()?.len().saturating_sub(at)
            }
        })
    }

    /// Its chunks of at most [`CHUNK_BYTES`], one a call, `None` after the last.
    fn chunks(self) -> impl FnMut() -> std::io::Result<Option<Vec<u8>>> {
        let mut at = 0usize;
        move || match &self {
            Gift::Bytes(b) => {
                if at >= b.len() {
                    return Ok(None);
                }
                let end = (at + CHUNK_BYTES).min(b.len());
                let chunk = b[at..end].to_vec();
                at = end;
                Ok(Some(chunk))
            }
            Gift::File(f) => {
                let mut chunk = Vec::with_capacity(CHUNK_BYTES);
                f.take(CHUNK_BYTES as u64).read_to_end(&mut chunk)?;
                Ok((!chunk.is_empty()).then_some(chunk))
            }
        }
    }
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
        let mut got = vec![Vec::new(); self.parts];
        let gifts = gifts.into_iter().map(Gift::Bytes).collect();
        self.meet_with(gifts, &mut |from, data| {
            got[from].extend_from_slice(data);
            Ok(())
        })?;
        Ok(got)
    }

    /// The last meeting of a slice's parts: each helper gives the leader its values (`mine`,
    /// its spool file), read a chunk at a time; the leader's come into files of `dir`, returned
    /// by part (its own place `None`, and every place of a helper). Neither side holds the
    /// values in memory.
    pub(super) fn meet_values(
        &mut self,
        mine: Option<std::fs::File>,
        dir: &std::path::Path,
    ) -> Result<Vec<Option<std::fs::File>>, SolveError> {
        let (parts, me) = (self.parts, self.me);
        debug_assert_eq!(
            mine.is_some(),
            me != 0,
            "helpers give their values, the leader keeps its own"
        );
        let mut gifts: Vec<Gift> = (0..parts).map(|_| Gift::Bytes(Vec::new())).collect();
        if let Some(mine) = mine {
            gifts[0] = Gift::File(mine);
        }
        let mut files = (0..parts)
            .map(|k| {
                (me == 0 && k != me)
                    .then(|| tempfile::tempfile_in(dir).map(std::io::BufWriter::new))
                    .transpose()
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(SolveError::Scratch)?;
        self.meet_with(gifts, &mut |from, data| match &mut files[from] {
            Some(f) => f.write_all(data).map_err(SolveError::Scratch),
            None => Err(bad(format!(
                "values from part {from}, to a part that is not the leader"
            ))),
        })?;
        files
            .into_iter()
            .map(|f| {
                f.map(|f| f.into_inner().map_err(|e| SolveError::Scratch(e.into_error())))
                    .transpose()
            })
            .collect()
    }

    /// One meeting: gives `gifts[k]` to part `k` (empty for this part), a chunk at a time, and
    /// hands each chunk another part gave this one to `take(from, bytes)` as it comes.
    fn meet_with(
        &mut self,
        gifts: Vec<Gift>,
        take: &mut dyn FnMut(usize, &[u8]) -> Result<(), SolveError>,
    ) -> Result<(), SolveError> {
        debug_assert_eq!(gifts.len(), self.parts);
        let (parts, me, round) = (self.parts, self.me, self.round);
        for (_, g) in gifts.iter().enumerate().filter(|&(k, _)| k != me) {
            self.gave += g.len().map_err(SolveError::Scratch)?;
        }
        let header = pb::MeetHeader {
            worker_id: self.worker_id,
            lease_id: self.lease_id,
            round,
        };
        // The chunks are made by a thread of their own (a gift may be read from a file) and
        // sent as the call takes them.
        let (tx, rx) = tokio::sync::mpsc::channel::<pb::MeetChunk>(4);
        let producer = self.runtime.spawn_blocking(move || -> std::io::Result<()> {
            // The header travels on a chunk of its own, addressed to another part.
            let first = pb::MeetChunk {
                header: Some(header),
                peer: ((me + 1) % parts) as u32,
                data: Vec::new(),
            };
            if tx.blocking_send(first).is_err() {
                return Ok(()); // The call ended first: its error says why.
            }
            // Nothing goes to this part itself.
            for (k, g) in gifts.into_iter().enumerate().filter(|&(k, _)| k != me) {
                let mut next = g.chunks();
                while let Some(data) = next()? {
                    let chunk = pb::MeetChunk {
                        header: None,
                        peer: k as u32,
                        data,
                    };
                    if tx.blocking_send(chunk).is_err() {
                        return Ok(());
                    }
                }
            }
            Ok(())
        });
        let request = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut client = self.client.clone();
        // At most all of the slice's values, compressed at worst, from all the parts together.
        let limit = 4 * self.n + (64 << 20);
        let mut took = 0u64;
        let answered = self.runtime.block_on(async {
            let mut stream = client.meet(request).await?.into_inner();
            while let Some(c) = stream.message().await? {
                let from = c.peer as usize;
                took += c.data.len() as u64;
                if from >= parts || from == me || took > limit {
                    return Err(tonic::Status::data_loss(format!(
                        "an answer from part {from} of {parts} ({took} bytes)"
                    )));
                }
                if let Err(e) = take(from, &c.data) {
                    return Ok(Err(e));
                }
            }
            Ok::<_, tonic::Status>(Ok(()))
        });
        // A meeting that failed is not waited on: its thread ends when the call lets go of
        // the chunks. One that was answered took every chunk (the coordinator answers once all
        // parts gave), so the thread is done or ending; a gift that could not be read ended
        // early and is the error.
        let answered = answered.map_err(|s| bad(format!("meeting {round} of the parts: {}", s.message())))?;
        self.runtime
            .block_on(producer)
            .map_err(|e| bad(format!("the gifts of meeting {round}: {e}")))?
            .map_err(SolveError::Scratch)?;
        answered?;
        self.took += took;
        self.round += 1;
        Ok(())
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
        let n = 3 * SEG_INDICES as u64;
        let spooled = |segments: &[u32]| {
            let mut spool = Spool::new(dir.path()).unwrap();
            for &s in segments {
                let v: Vec<u16> = values.iter().map(|v| v + s as u16).collect();
                spool.push(s, &compress_segment(&v)).unwrap();
            }
            spool.into_file().unwrap()
        };
        // Two parts' files, the segments in any order: each found where it is.
        let mut parts = PartValues::new(3);
        parts.add(0, spooled(&[2, 0])).unwrap();
        assert!(parts.segment(1, n).is_err(), "a segment no part gave is an error");
        assert!(parts.check_complete().is_err());
        parts.add(1, spooled(&[1])).unwrap();
        parts.check_complete().unwrap();
        for s in 0..3u16 {
            let want: Vec<u16> = values.iter().map(|v| v + s).collect();
            assert_eq!(parts.segment(s as usize, n).unwrap(), want);
        }
        // A segment given twice, or past the slice, is refused.
        assert!(parts.add(2, spooled(&[1])).is_err());
        assert!(PartValues::new(3).add(0, spooled(&[3])).is_err());
        // A segment of another length is refused.
        let mut short = PartValues::new(3);
        short.add(0, spooled(&[2])).unwrap();
        assert!(short.segment(2, n - 1).is_err());
        // A file cut short is refused when it is added.
        let cut = spooled(&[0, 1]);
        let len = cut.metadata().unwrap().len();
        cut.set_len(len - 1).unwrap();
        assert!(PartValues::new(3).add(0, cut).is_err());
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
            if let Ok(segs) = index_values(&mut &m[..], m.len() as u64) {
                for (_, offset, z) in segs {
                    prop_assert!(offset + u64::from(z) <= m.len() as u64, "a segment inside the bytes");
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
