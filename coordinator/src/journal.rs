//! The coordinator's journal: an append-only file of the jobs it took and the slices that
//! finished, so that a restarted coordinator resumes without redoing finished work.
//!
//! ```text
//! file header  16 bytes: b"ZRMLJNL\n", format version (u32 LE), 0u32
//! batch        len (u32 LE), !len (u32 LE), crc32 of the payload (u32 LE), payload (len bytes):
//!              the records of one append, back to back
//! record       tag 1 (job): job (u64), material count (u32), per material: length (u8), name
//!              tag 2 (slice): material length (u8), name, white pawns (u64), black pawns (u64),
//!                             content hash (32 bytes), positions (u64)
//! ```
//!
//! Each [`Journal::append`] writes one length-prefixed, CRC32-checked batch and then calls
//! `sync_data`: once it returns, its records survive a crash, and a crash during it leaves none
//! of them. A crash can only damage the batch it was appending, the last one: a header cut short,
//! a payload cut short, or bytes that never reached the disk (zeros, or pages of the batch
//! written out of order). [`Journal::open`] replays the batches before such a *torn tail* and
//! cuts it off. Damage with a valid batch after it is not something a crash does: it is refused
//! as [`JournalError::Corrupt`], and the file is left as it is.
//!
//! ```
//! use zermelo_coordinator::schedule::{JobId, SliceResult};
//! use zermelo_coordinator::{Journal, Record};
//! use zermelo_chess::SliceKey;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("journal");
//! let (mut journal, replay) = Journal::open(&path)?;
//! assert!(replay.records.is_empty());
//! let kqk = SliceKey::pawnless("KQvK".parse()?);
//! journal.append(&[
//!     Record::JobSubmitted { job: JobId(1), materials: vec!["KQvK".parse()?] },
//!     Record::SliceFinished(SliceResult { key: kqk, hash: [1; 32], positions: 131_072 }),
//! ])?;
//! drop(journal);
//!
//! let (_, replay) = Journal::open(&path)?;
//! assert_eq!(replay.records.len(), 2);
//! assert_eq!(replay.torn_bytes, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use zermelo_chess::{Bitboard, Material, SliceKey};

use crate::schedule::{JobId, SliceResult};

const MAGIC: [u8; 8] = *b"ZRMLJNL\n";
/// The version of the journal format this build writes and reads. 2: the slice hashes it records
/// cover the index layout (table format 2); a journal of version 1 holds hashes this build does
/// not compute, and is refused.
pub const FORMAT_VERSION: u32 = 2;
const FILE_HEADER_LEN: u64 = 16;
const BATCH_HEADER_LEN: usize = 12;
/// The largest payload of one batch (one append). A task's completion is a few hundred records
/// of about 80 bytes; a larger length in a batch header is damage, not data.
pub const MAX_BATCH: u32 = 16 << 20;

const TAG_JOB: u8 = 1;
const TAG_SLICE: u8 = 2;
const TAG_ANALYSIS: u8 = 3;

/// One entry of the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A job was taken, with the materials it asked for (the plan is derived from them again).
    JobSubmitted { job: JobId, materials: Vec<Material> },
    /// A slice finished (its first accepted completion).
    SliceFinished(SliceResult),
    /// An analysis job was taken: the slices reachable from these root slices (the plan is
    /// derived from them again).
    AnalysisSubmitted { job: JobId, roots: Vec<SliceKey> },
}

/// What a job asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobSpec {
    /// These materials and every material they convert into.
    Materials(Vec<Material>),
    /// The slices reachable from these root slices (`zermelo analyse --coordinator`).
    Analysis(Vec<SliceKey>),
}

impl JobSpec {
    /// The journal record of job `job` asking for this.
    pub fn record(&self, job: JobId) -> Record {
        match self {
            JobSpec::Materials(materials) => Record::JobSubmitted {
                job,
                materials: materials.clone(),
            },
            JobSpec::Analysis(roots) => Record::AnalysisSubmitted {
                job,
                roots: roots.clone(),
            },
        }
    }
}

/// What [`Journal::open`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replay {
    /// Every record of every valid batch, in the order appended.
    pub records: Vec<Record>,
    /// Bytes of a torn tail that were cut off (0 after a clean stop).
    pub torn_bytes: u64,
}

impl Replay {
    /// The jobs taken, in order, with what each asked for.
    pub fn jobs(&self) -> impl Iterator<Item = (JobId, JobSpec)> + '_ {
        self.records.iter().filter_map(|r| match r {
            Record::JobSubmitted { job, materials } => Some((*job, JobSpec::Materials(materials.clone()))),
            Record::AnalysisSubmitted { job, roots } => Some((*job, JobSpec::Analysis(roots.clone()))),
            Record::SliceFinished(_) => None,
        })
    }

    /// The slices finished, in order: what [`Scheduler::resume`](crate::schedule::Scheduler::resume)
    /// starts from.
    pub fn finished(&self) -> impl Iterator<Item = SliceResult> + '_ {
        self.records.iter().filter_map(|r| match r {
            Record::SliceFinished(s) => Some(*s),
            Record::JobSubmitted { .. } | Record::AnalysisSubmitted { .. } => None,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("journal {path} is corrupt at byte {offset}: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error("{path} is not a zermelo journal")]
    NotAJournal { path: PathBuf },
    #[error(
        "journal {path} has format version {found}; this build reads version {FORMAT_VERSION}: \
         finish its jobs with the build that wrote it, or remove the coordinator's state \
         directory to start afresh (finished tables stay, and are built again only if they are \
         of an older table format)"
    )]
    UnsupportedVersion { path: PathBuf, found: u32 },
    #[error("an append of {len} bytes is larger than a journal batch may be ({MAX_BATCH} bytes)")]
    BatchTooLarge { len: usize },
    #[error("journal {path} failed an append and could not be restored; reopen it")]
    Poisoned { path: PathBuf },
}

/// An open journal, positioned at its end. See the [module docs](self).
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    /// The length of the valid journal: where the next batch goes.
    len: u64,
    poisoned: bool,
}

impl Journal {
    /// Opens the journal at `path`, creating it if there is none; replays its records and cuts
    /// off a torn tail.
    pub fn open(path: &Path) -> Result<(Journal, Replay), JournalError> {
        let io_err = |source| JournalError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err)?;

        if bytes.len() < FILE_HEADER_LEN as usize && header_bytes().starts_with(&bytes) {
            // New, or a crash while it was being created: write the header.
            file.set_len(0).map_err(io_err)?;
            file.seek(SeekFrom::Start(0)).map_err(io_err)?;
            file.write_all(&header_bytes()).map_err(io_err)?;
            file.sync_all().map_err(io_err)?;
            zermelo_storage::durable::sync_parent_dir(path).map_err(io_err)?;
            let journal = Journal {
                path: path.to_owned(),
                file,
                len: FILE_HEADER_LEN,
                poisoned: false,
            };
            return Ok((journal, Replay::default()));
        }
        if bytes.len() < FILE_HEADER_LEN as usize || bytes[..8] != MAGIC {
            return Err(JournalError::NotAJournal {
                path: path.to_owned(),
            });
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(JournalError::UnsupportedVersion {
                path: path.to_owned(),
                found: version,
            });
        }
        if bytes[12..16] != [0; 4] {
            let reason = "reserved header bytes are not zero".to_owned();
            return Err(JournalError::Corrupt {
                path: path.to_owned(),
                offset: 12,
                reason,
            });
        }

        let (records, valid) = replay(path, &bytes)?;
        let torn_bytes = bytes.len() as u64 - valid;
        if torn_bytes > 0 {
            tracing::warn!(path = %path.display(), torn_bytes, "cutting the torn tail off the journal");
            file.set_len(valid).map_err(io_err)?;
            file.sync_all().map_err(io_err)?;
        }
        file.seek(SeekFrom::Start(valid)).map_err(io_err)?;
        let journal = Journal {
            path: path.to_owned(),
            file,
            len: valid,
            poisoned: false,
        };
        Ok((journal, Replay { records, torn_bytes }))
    }

    /// Appends records as one batch and syncs it to disk: when this returns `Ok`, they survive a
    /// crash; after a crash during it, none of them is replayed. On an error nothing of them is in
    /// the journal: the file is cut back to where it was (if even that fails, the journal refuses
    /// further appends). Appending no record writes nothing.
    pub fn append(&mut self, records: &[Record]) -> Result<(), JournalError> {
        if self.poisoned {
            return Err(JournalError::Poisoned {
                path: self.path.clone(),
            });
        }
        if records.is_empty() {
            return Ok(());
        }
        let buf = encode_batch(records)?;
        let write = (|| {
            self.file.write_all(&buf)?;
            self.file.sync_data()
        })();
        if let Err(source) = write {
            let restore = (|| {
                self.file.set_len(self.len)?;
                self.file.seek(SeekFrom::Start(self.len))?;
                self.file.sync_data()
            })();
            if restore.is_err() {
                self.poisoned = true;
            }
            return Err(JournalError::Io {
                path: self.path.clone(),
                source,
            });
        }
        self.len += buf.len() as u64;
        Ok(())
    }

    /// The journal's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the journal holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == FILE_HEADER_LEN
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn header_bytes() -> [u8; FILE_HEADER_LEN as usize] {
    let mut h = [0u8; FILE_HEADER_LEN as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h
}

/// Decodes the batches after the file header; returns their records and the length of the
/// valid prefix. Damage is a torn tail (cut off) only when no valid batch follows it.
fn replay(path: &Path, bytes: &[u8]) -> Result<(Vec<Record>, u64), JournalError> {
    let corrupt = |offset: usize, reason: String| JournalError::Corrupt {
        path: path.to_owned(),
        offset: offset as u64,
        reason,
    };
    let mut records = Vec::new();
    let mut at = FILE_HEADER_LEN as usize;
    while at < bytes.len() {
        match batch_at(bytes, at) {
            Ok((payload, end)) => {
                decode_batch(payload, &mut records).map_err(|reason| corrupt(at, reason))?;
                at = end;
            }
            Err(damage) => {
                // A crash tears the last batch only; a valid batch after the damage means the
                // damage came from elsewhere. (Only this failure path scans byte by byte.)
                if let Some(next) = (at + 1..bytes.len()).find(|&o| batch_at(bytes, o).is_ok()) {
                    return Err(corrupt(
                        at,
                        format!("{damage}, and a valid batch follows at byte {next}"),
                    ));
                }
                return Ok((records, at as u64));
            }
        }
    }
    Ok((records, at as u64))
}

/// The payload and end of a whole, checksum-valid batch starting at `at`, or what is wrong.
fn batch_at(bytes: &[u8], at: usize) -> Result<(&[u8], usize), &'static str> {
    let rest = &bytes[at..];
    if rest.len() < BATCH_HEADER_LEN {
        return Err("batch header cut short");
    }
    let word = |i: usize| u32::from_le_bytes(rest[4 * i..4 * i + 4].try_into().expect("4 bytes"));
    let (len, check, crc) = (word(0), word(1), word(2));
    if len != !check || len > MAX_BATCH {
        return Err("batch header damaged");
    }
    let end = BATCH_HEADER_LEN + len as usize;
    if rest.len() < end {
        return Err("batch cut short");
    }
    let payload = &rest[BATCH_HEADER_LEN..end];
    if crc32fast::hash(payload) != crc {
        return Err("batch checksum mismatch");
    }
    Ok((payload, at + end))
}

fn encode_batch(records: &[Record]) -> Result<Vec<u8>, JournalError> {
    let mut p = Vec::new();
    for record in records {
        match record {
            Record::JobSubmitted { job, materials } => {
                p.push(TAG_JOB);
                p.extend_from_slice(&job.0.to_le_bytes());
                let count = u32::try_from(materials.len()).unwrap_or(u32::MAX);
                p.extend_from_slice(&count.to_le_bytes());
                for m in materials {
                    push_name(&mut p, &m.to_string());
                }
            }
            Record::SliceFinished(r) => {
                p.push(TAG_SLICE);
                push_key(&mut p, &r.key);
                p.extend_from_slice(&r.hash);
                p.extend_from_slice(&r.positions.to_le_bytes());
            }
            Record::AnalysisSubmitted { job, roots } => {
                p.push(TAG_ANALYSIS);
                p.extend_from_slice(&job.0.to_le_bytes());
                let count = u32::try_from(roots.len()).unwrap_or(u32::MAX);
                p.extend_from_slice(&count.to_le_bytes());
                for k in roots {
                    push_key(&mut p, k);
                }
            }
        }
    }
    let len = u32::try_from(p.len()).ok().filter(|&l| l <= MAX_BATCH);
    let len = len.ok_or(JournalError::BatchTooLarge { len: p.len() })?;
    let mut out = Vec::with_capacity(BATCH_HEADER_LEN + p.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&p).to_le_bytes());
    out.extend_from_slice(&p);
    Ok(out)
}

fn push_key(p: &mut Vec<u8>, key: &SliceKey) {
    push_name(p, &key.material.to_string());
    p.extend_from_slice(&key.white_pawns.0.to_le_bytes());
    p.extend_from_slice(&key.black_pawns.0.to_le_bytes());
}

fn push_name(p: &mut Vec<u8>, name: &str) {
    // A material name is at most 2 kings and 30 other men, far below 255 bytes.
    let len = u8::try_from(name.len()).expect("a material name is short");
    p.push(len);
    p.extend_from_slice(name.as_bytes());
}

/// Reads the records of a batch whose checksum is right; an error here is a record this build
/// cannot read.
fn decode_batch(p: &[u8], out: &mut Vec<Record>) -> Result<(), String> {
    let mut r = Reader(p);
    while !r.0.is_empty() {
        let record = match r.u8()? {
            TAG_JOB => {
                let job = JobId(r.u64()?);
                let count = r.u32()?;
                let mut materials = Vec::new();
                for _ in 0..count {
                    materials.push(r.material()?);
                }
                Record::JobSubmitted { job, materials }
            }
            TAG_SLICE => {
                let key = r.key()?;
                let hash = r.take(32)?.try_into().expect("32 bytes");
                let positions = r.u64()?;
                Record::SliceFinished(SliceResult { key, hash, positions })
            }
            TAG_ANALYSIS => {
                let job = JobId(r.u64()?);
                let count = r.u32()?;
                let mut roots = Vec::new();
                for _ in 0..count {
                    roots.push(r.key()?);
                }
                Record::AnalysisSubmitted { job, roots }
            }
            tag => return Err(format!("unknown record tag {tag}")),
        };
        out.push(record);
    }
    Ok(())
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("record ends early".to_owned());
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn key(&mut self) -> Result<SliceKey, String> {
        Ok(SliceKey {
            material: self.material()?,
            white_pawns: Bitboard(self.u64()?),
            black_pawns: Bitboard(self.u64()?),
        })
    }

    fn material(&mut self) -> Result<Material, String> {
        let len = self.u8()? as usize;
        let name =
            std::str::from_utf8(self.take(len)?).map_err(|_| "material name is not UTF-8".to_owned())?;
        name.parse().map_err(|e| format!("bad material {name:?}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc;
    use std::time::{Duration, SystemTime};

    use super::*;

    /// The `n`th record of a test journal: jobs and slices of varying lengths.
    fn record(n: u64) -> Record {
        let even = n & 1 == 0;
        let job = n % 3 < 1;
        if job {
            let names = ["KPvK", "KQvKR", "KRPvKR", "KBNvK", "KPPvKP"];
            let materials = names
                .iter()
                .take((n % 6) as usize)
                .map(|m| m.parse().unwrap())
                .collect();
            Record::JobSubmitted {
                job: JobId(n),
                materials,
            }
        } else {
            let key = SliceKey {
                material: if even { "KPvKP" } else { "KPvK" }.parse().unwrap(),
                white_pawns: Bitboard(1 << (8 + n % 48)),
                black_pawns: Bitboard(if even { 1 << (8 + (n + 1) % 48) } else { 0 }),
            };
            let mut hash = [0u8; 32];
            hash[..8].copy_from_slice(&n.to_le_bytes());
            Record::SliceFinished(SliceResult {
                key,
                hash,
                positions: 8192 * n,
            })
        }
    }

    fn assert_prefix(records: &[Record]) {
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r, &record(i as u64), "record {i}");
        }
    }

    /// A journal of records `0..n`: one append each, but the last `last_batch` in one append.
    /// Returns the offset where that last batch starts.
    fn write_journal(path: &Path, n: u64, last_batch: u64) -> u64 {
        let (mut j, _) = Journal::open(path).unwrap();
        for i in 0..n - last_batch {
            j.append(&[record(i)]).unwrap();
        }
        let last = j.len();
        j.append(&(n - last_batch..n).map(record).collect::<Vec<_>>())
            .unwrap();
        last
    }

    #[test]
    fn records_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let (mut j, replay) = Journal::open(&path).unwrap();
        assert_eq!(replay, Replay::default());
        assert!(j.is_empty());
        j.append(&[]).unwrap();
        assert!(j.is_empty());
        j.append(&(0..5).map(record).collect::<Vec<_>>()).unwrap();
        j.append(&[record(5)]).unwrap();
        let len = j.len();
        drop(j);

        let (mut j, replay) = Journal::open(&path).unwrap();
        assert_eq!(replay.records.len(), 6);
        assert_prefix(&replay.records);
        assert_eq!(replay.torn_bytes, 0);
        assert_eq!(j.len(), len);
        j.append(&[record(6), record(7)]).unwrap();
        drop(j);

        let (j, replay) = Journal::open(&path).unwrap();
        assert_eq!(replay.records.len(), 8);
        assert_prefix(&replay.records);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), j.len());
    }

    /// An analysis job's roots come back as they went in, and `jobs` lists both kinds in order.
    #[test]
    fn analysis_jobs_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let roots = vec![
            SliceKey {
                material: "KPPPPvKPPP".parse().unwrap(),
                white_pawns: Bitboard(0x0000_0028_2900_0000),
                black_pawns: Bitboard(0x0008_0021_0000_0000),
            },
            SliceKey::pawnless("KQvK".parse().unwrap()),
        ];
        let (mut j, _) = Journal::open(&path).unwrap();
        let analysis = Record::AnalysisSubmitted {
            job: JobId(2),
            roots: roots.clone(),
        };
        j.append(&[record(1), analysis.clone(), record(2)]).unwrap();
        drop(j);
        let (_, replay) = Journal::open(&path).unwrap();
        assert_eq!(replay.records[1], analysis);
        let jobs: Vec<(JobId, JobSpec)> = replay.jobs().collect();
        assert_eq!(jobs, vec![(JobId(2), JobSpec::Analysis(roots))]);
        assert_eq!(replay.finished().count(), 2);
    }

    /// A crash can cut the last batch anywhere: every such cut drops the whole batch (all three
    /// of its records), keeps the records before it, and appending goes on from there.
    #[test]
    fn torn_tail_at_every_offset_of_the_last_batch_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("whole");
        let last = write_journal(&whole, 9, 3);
        let bytes = std::fs::read(&whole).unwrap();
        let path = dir.path().join("torn");
        for cut in last..bytes.len() as u64 {
            std::fs::write(&path, &bytes[..cut as usize]).unwrap();
            let (mut j, replay) = Journal::open(&path).unwrap();
            assert_eq!(replay.records.len(), 6, "cut at {cut}");
            assert_prefix(&replay.records);
            assert_eq!(replay.torn_bytes, cut - last);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), last);
            j.append(&(6..9).map(record).collect::<Vec<_>>()).unwrap();
            drop(j);
            assert_eq!(
                std::fs::read(&path).unwrap(),
                bytes,
                "cut at {cut}, appended again"
            );
        }
    }

    /// After a power cut the last batch's bytes may be missing (zeros), in whole or in part, and
    /// its pages may have reached the disk out of order: all torn tails.
    #[test]
    fn last_batch_with_bytes_that_never_reached_the_disk_is_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("whole");
        let last = write_journal(&whole, 8, 4) as usize;
        let bytes = std::fs::read(&whole).unwrap();
        let n = bytes.len();
        let path = dir.path().join("journal");
        let zeroed = |range: std::ops::Range<usize>, extra: usize| {
            let mut b = bytes.clone();
            b[range].fill(0);
            b.resize(n + extra, 0);
            b
        };
        let cases = [
            ("all zeros, and the file grew further", zeroed(last..n, 100)),
            (
                "header lost, payload written",
                zeroed(last..last + BATCH_HEADER_LEN, 0),
            ),
            (
                "header written, payload lost",
                zeroed(last + BATCH_HEADER_LEN..n, 0),
            ),
            ("a hole in the payload", zeroed(last + 20..last + 40, 0)),
        ];
        for (what, damaged) in cases {
            std::fs::write(&path, &damaged).unwrap();
            let (_, replay) = Journal::open(&path).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(replay.records.len(), 4, "{what}");
            assert_prefix(&replay.records);
            assert_eq!(replay.torn_bytes as usize, damaged.len() - last, "{what}");
        }
    }

    /// A flipped byte anywhere before the last batch is damage, not a crash: refused, and the
    /// file left as it was.
    #[test]
    fn flipped_byte_in_the_middle_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let whole = dir.path().join("whole");
        let last = write_journal(&whole, 8, 2);
        let bytes = std::fs::read(&whole).unwrap();
        let path = dir.path().join("flipped");
        for at in FILE_HEADER_LEN..last {
            let mut damaged = bytes.clone();
            damaged[at as usize] ^= 0x20;
            std::fs::write(&path, &damaged).unwrap();
            match Journal::open(&path) {
                Err(JournalError::Corrupt { offset, .. }) => {
                    assert!(offset <= at, "flip at {at}, reported {offset}")
                }
                other => panic!("flip at {at}: {other:?}"),
            }
            assert_eq!(
                std::fs::read(&path).unwrap(),
                damaged,
                "flip at {at}: the file was changed"
            );
        }
    }

    #[test]
    fn damaged_file_header_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        write_journal(&path, 2, 1);
        let bytes = std::fs::read(&path).unwrap();
        let with = |at: usize| {
            let mut b = bytes.clone();
            b[at] ^= 1;
            std::fs::write(&path, b).unwrap();
            Journal::open(&path)
        };
        assert!(matches!(with(0), Err(JournalError::NotAJournal { .. })));
        // Version 2 with its low bit flipped reads as 3; version 1 (slice hashes without the
        // index layout) is refused with what to do.
        assert!(matches!(
            with(8),
            Err(JournalError::UnsupportedVersion { found: 3, .. })
        ));
        let err = with(9).map(|_| ()).unwrap_err();
        assert!(matches!(err, JournalError::UnsupportedVersion { found: 258, .. }));
        let mut old = bytes.clone();
        old[8..12].copy_from_slice(&1u32.to_le_bytes());
        std::fs::write(&path, old).unwrap();
        let err = Journal::open(&path).map(|_| ()).unwrap_err();
        assert!(
            err.to_string()
                .contains("format version 1; this build reads version 2"),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("remove the coordinator's state directory"),
            "{err}"
        );
        assert!(matches!(with(13), Err(JournalError::Corrupt { offset: 12, .. })));
        std::fs::write(&path, b"not a journal at all").unwrap();
        let err = Journal::open(&path).unwrap_err();
        assert!(err.to_string().contains("is not a zermelo journal"), "{err}");
    }

    /// A crash while the journal was being created leaves a prefix of its header: start afresh.
    #[test]
    fn journal_cut_inside_its_file_header_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        for cut in 0..FILE_HEADER_LEN as usize {
            std::fs::write(&path, &header_bytes()[..cut]).unwrap();
            let (mut j, replay) = Journal::open(&path).unwrap();
            assert!(replay.records.is_empty());
            j.append(&[record(0)]).unwrap();
            drop(j);
            assert_eq!(Journal::open(&path).unwrap().1.records, [record(0)]);
        }
    }

    #[test]
    fn record_with_a_good_checksum_but_unknown_tag_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        write_journal(&path, 0, 0);
        let mut bytes = std::fs::read(&path).unwrap();
        let payload = [9u8, 1, 2, 3];
        bytes.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&(!(payload.len() as u32)).to_le_bytes());
        bytes.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        bytes.extend_from_slice(&payload);
        std::fs::write(&path, &bytes).unwrap();
        let err = Journal::open(&path).unwrap_err();
        assert!(err.to_string().contains("unknown record tag 9"), "{err}");
    }

    /// The coordinator's restart path without the network: a scheduler's finished slices go
    /// to the journal; a new scheduler resumes from the reopened journal and resubmits its jobs;
    /// only the rest is leased.
    #[test]
    fn scheduler_resumes_from_a_reopened_journal() {
        use crate::plan::plan;
        use crate::schedule::{Action, Config, Event, Scheduler};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let materials: Vec<Material> = vec!["KPvK".parse().unwrap()];
        let total = plan(&materials)
            .materials
            .iter()
            .map(|m| m.slice_count())
            .sum::<usize>();
        let solve = |s: &mut Scheduler, j: &mut Journal, now: u64, tasks: usize| {
            let worker = match s.handle(now, Event::WorkerRegistered)[..] {
                [Action::Registered { worker, .. }] => worker,
                ref other => panic!("{other:?}"),
            };
            let mut solved = Vec::new();
            for _ in 0..tasks {
                let Some(Action::Lease(t)) = s.handle(now, Event::LeaseRequested { worker }).pop() else {
                    break;
                };
                let slices = t
                    .slices
                    .iter()
                    .map(|&key| SliceResult {
                        key,
                        hash: [key.rank_sum() as u8; 32],
                        positions: zermelo_chess::index::SliceIndexer::new(key).size(),
                    })
                    .collect();
                let actions = s.handle(
                    now,
                    Event::TaskCompleted {
                        lease: t.lease,
                        slices,
                    },
                );
                let finished: Vec<Record> = actions
                    .iter()
                    .filter_map(|a| match a {
                        Action::SliceFinished(r) => Some(Record::SliceFinished(*r)),
                        _ => None,
                    })
                    .collect();
                j.append(&finished).unwrap();
                solved.extend(t.slices);
            }
            solved
        };

        let (mut j, _) = Journal::open(&path).unwrap();
        let mut s = Scheduler::new(Config {
            target_task_positions: 8192,
            ..Config::default()
        });
        j.append(&[Record::JobSubmitted {
            job: JobId(1),
            materials: materials.clone(),
        }])
        .unwrap();
        s.handle(
            0,
            Event::JobSubmitted {
                job: JobId(1),
                plan: plan(&materials),
            },
        );
        let before = solve(&mut s, &mut j, 0, 10);
        drop((s, j));

        let (mut j, replay) = Journal::open(&path).unwrap();
        assert_eq!(replay.finished().count(), before.len());
        let mut s = Scheduler::resume(
            Config {
                first_id: 1 << 40,
                ..Config::default()
            },
            replay.finished(),
        )
        .unwrap();
        for (job, spec) in replay.jobs() {
            let JobSpec::Materials(materials) = spec else {
                panic!("only materials jobs here");
            };
            let actions = s.handle(
                0,
                Event::JobSubmitted {
                    job,
                    plan: plan(&materials),
                },
            );
            assert!(
                matches!(actions[..], [Action::JobAccepted { finished, .. }] if finished as usize == before.len())
            );
        }
        let after = solve(&mut s, &mut j, 0, usize::MAX);
        assert!(
            after.iter().all(|k| !before.contains(k)),
            "a finished slice was leased again"
        );
        assert_eq!(before.len() + after.len(), total);
        assert!(s.job(JobId(1)).unwrap().is_done());
    }

    const CHILD_ENV: &str = "ZERMELO_TEST_JOURNAL_CRASH_WRITER";
    const CHILD_TEST: &str = "journal::tests::crash_writer";

    /// Not a test on its own: the writer that [`sigkill_while_appending_keeps_every_acknowledged_record`]
    /// starts as a child process (this test binary, with `CHILD_ENV` naming the journal). It
    /// appends records and prints `ack N` once the append of record N returned. In a normal run
    /// the variable is unset and it returns at once.
    #[test]
    fn crash_writer() {
        let Some(path) = std::env::var_os(CHILD_ENV) else {
            return;
        };
        let (mut j, replay) = Journal::open(Path::new(&path)).unwrap();
        let mut out = io::stdout().lock();
        let start = std::time::Instant::now();
        // Bounded, in case the parent dies without killing us.
        for n in replay.records.len() as u64..1_000_000 {
            j.append(&[record(n)]).unwrap();
            writeln!(out, "ack {n}").unwrap();
            out.flush().unwrap();
            if start.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
    }

    /// Kills the child when dropped, so that a failing test leaves no writer behind.
    struct KillOnDrop(Child);

    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A real crash: a child process appends in a loop and is killed with SIGKILL after a random
    /// delay, five times over on the same journal. Each reopening must replay a valid prefix that
    /// holds every record whose append had returned.
    #[test]
    fn sigkill_while_appending_keeps_every_acknowledged_record() {
        if std::env::var_os(CHILD_ENV).is_some() {
            return; // we are a writer child; only `crash_writer` runs there
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal");
        let mut seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        let mut acked_total = 0;
        for round in 0..5 {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args([CHILD_TEST, "--exact", "--nocapture", "--test-threads=1"])
                .env(CHILD_ENV, &path)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let stdout = child.stdout.take().unwrap();
            let mut child = KillOnDrop(child);
            let (tx, rx) = mpsc::channel();
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(n) = line.strip_prefix("ack ") {
                        let _ = tx.send(n.parse::<u64>().unwrap());
                    }
                }
            });
            let first = rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the writer acknowledged a record");
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            std::thread::sleep(Duration::from_micros(seed % 30_000));
            child.0.kill().unwrap(); // SIGKILL
            child.0.wait().unwrap();
            reader.join().unwrap();
            let acked = rx.try_iter().fold(first, u64::max);

            let (_, replay) = Journal::open(&path).unwrap();
            assert_prefix(&replay.records);
            assert!(
                replay.records.len() as u64 > acked,
                "round {round}: record {acked} was acknowledged but only {} replayed",
                replay.records.len()
            );
            acked_total = acked;
        }
        assert!(acked_total >= 5, "the writer made progress across rounds");
    }
}
