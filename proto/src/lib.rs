//! The wire protocol between the Zermelo coordinator, its workers and its clients: the gRPC
//! service `zermelo.v1.Coordinator` and its messages, generated from `proto/zermelo.proto` (read
//! it for what each field means) by protox and tonic-prost-build at build time, with no system
//! `protoc`.
//!
//! Besides the generated code ([`v1`], re-exported at the top) this crate holds the protocol
//! version both sides check at registration ([`PROTOCOL_VERSION`], [`check_version`]) and the
//! framing of slice streams ([`slice_chunks`] cuts a slice into chunks, [`SliceAssembler`] puts
//! the chunks of a stream back together and checks their lengths, [`SliceFramer`] checks them
//! without holding the bytes).
//!
//! ```
//! use zermelo_proto::{slice_chunks, SliceAssembler, SliceHeader, SliceKey};
//!
//! let header = SliceHeader {
//!     key: Some(SliceKey { material: "KPvK".into(), white_pawns: 1 << 12, black_pawns: 0 }),
//!     total_length: 5,
//!     content_hash: vec![7; 32],
//!     positions: 8192,
//! };
//! let mut assembler = SliceAssembler::new();
//! let mut slices = Vec::new();
//! for chunk in slice_chunks(header.clone(), b"hello", 2) {
//!     slices.extend(assembler.push(chunk)?);
//! }
//! assembler.finish()?;
//! assert_eq!(slices, [(header, b"hello".to_vec())]);
//! # Ok::<(), zermelo_proto::FramingError>(())
//! ```

/// The generated messages, client (`coordinator_client`) and server (`coordinator_server`).
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("zermelo.v1");
}

pub use v1::*;

/// Version of the coordinator/worker protocol. Bumped on any incompatible wire change.
///
/// 2: a task names the hash of each successor (`Task.successor_hashes`), and slice hashes cover
/// the index layout.
/// 3: a task may be a verification (`Task.kind`), completed with a `Verdict`.
/// 4: a task may be one part of a slice solved by several workers (`Task.part`), which meet
/// through `Meet`.
/// 5: a task and a completion name slices as `SliceRef`s (a key with its hash), not as parallel
/// lists of keys and hashes.
pub const PROTOCOL_VERSION: u32 = 5;

/// Bytes of data per chunk of a slice stream (uploads, downloads) and per `Meet` chunk: well
/// under gRPC's 4 MiB message limit.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The most slice keys one `FetchSlice` request may name (the coordinator refuses more; a key
/// named twice is served once).
pub const MAX_FETCH_KEYS: usize = 256;

/// Checks the protocol version a worker registers with: `Err` with the refusal (naming both
/// versions) that the coordinator answers when it is not [`PROTOCOL_VERSION`].
pub fn check_version(worker_version: u32) -> Result<(), Refused> {
    if worker_version == PROTOCOL_VERSION {
        return Ok(());
    }
    Err(Refused {
        reason: format!(
            "protocol version {worker_version} is not supported: this coordinator speaks version \
             {PROTOCOL_VERSION}"
        ),
        coordinator_version: PROTOCOL_VERSION,
        worker_version,
    })
}

/// `head`, then each error of the chain from `source` whose text it does not hold already,
/// joined by ": " (a transport error's own message says little).
pub fn error_chain(head: impl Into<String>, source: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut out = head.into();
    for e in std::iter::successors(source, |e| e.source()) {
        let text = e.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

impl SliceKey {
    /// The pawn bitboards as `zermelo_storage` keys them: `[white pawns, black pawns]`.
    pub fn raw(&self) -> [u64; 2] {
        [self.white_pawns, self.black_pawns]
    }
}

/// Cuts one slice into stream chunks of at most `chunk_size` data bytes: the first carries the
/// header (and the first bytes), the rest only bytes. A slice of no bytes is one header chunk.
///
/// # Panics
/// If `chunk_size` is 0, or `header.total_length` is not `data.len()`.
pub fn slice_chunks(
    header: SliceHeader,
    data: &[u8],
    chunk_size: usize,
) -> impl Iterator<Item = SliceChunk> + '_ {
    assert!(chunk_size > 0, "chunk size 0");
    assert_eq!(
        header.total_length,
        data.len() as u64,
        "header length differs from the data"
    );
    let mut header = Some(header);
    let mut parts = data.chunks(chunk_size);
    std::iter::from_fn(move || match (header.take(), parts.next()) {
        (Some(h), part) => Some(SliceChunk {
            header: Some(h),
            data: part.unwrap_or_default().to_vec(),
        }),
        (None, Some(part)) => Some(SliceChunk {
            header: None,
            data: part.to_vec(),
        }),
        (None, None) => None,
    })
}

/// A slice stream that does not follow the framing of [`SliceChunk`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FramingError {
    #[error("slice data arrived before any slice header")]
    DataBeforeHeader,
    #[error("slice {key} has {received} bytes, more than the {expected} its header announced")]
    TooLong {
        key: String,
        expected: u64,
        received: u64,
    },
    #[error("slice {key} ended after {received} of the {expected} bytes its header announced")]
    Truncated {
        key: String,
        expected: u64,
        received: u64,
    },
    #[error("a slice header has no key")]
    MissingKey,
    #[error("slice {key} announces {length} bytes, more than the limit of {limit}")]
    TooLarge { key: String, length: u64, limit: u64 },
}

/// What [`SliceFramer::push`] makes of one chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// The header, on the chunk that begins a slice.
    pub header: Option<SliceHeader>,
    /// The chunk's bytes of the current slice.
    pub data: Vec<u8>,
    /// The slice's last byte arrived with this chunk.
    pub complete: bool,
}

/// Follows the framing of a slice stream chunk by chunk without holding its bytes: every chunk
/// goes to [`push`](Self::push), which checks it against the header's announced length and
/// says where it belongs; [`finish`](Self::finish) at the end of the stream. For receivers that
/// write slices to disk as they arrive; [`SliceAssembler`] holds them in memory.
#[derive(Debug)]
pub struct SliceFramer {
    /// The slice being received and its bytes so far.
    current: Option<(SliceHeader, u64)>,
    max_slice_bytes: u64,
}

impl SliceFramer {
    /// A framer that refuses a header announcing more than `max_slice_bytes`.
    pub fn with_limit(max_slice_bytes: u64) -> SliceFramer {
        SliceFramer {
            current: None,
            max_slice_bytes,
        }
    }

    /// The header of the slice being received, if one is under way.
    pub fn current(&self) -> Option<&SliceHeader> {
        self.current.as_ref().map(|(h, _)| h)
    }

    /// Takes the next chunk.
    pub fn push(&mut self, chunk: SliceChunk) -> Result<Piece, FramingError> {
        let mut begun = None;
        if let Some(header) = chunk.header {
            if let Some((h, received)) = self.current.take() {
                return Err(truncated(&h, received));
            }
            let key = header.key.as_ref().ok_or(FramingError::MissingKey)?;
            if header.total_length > self.max_slice_bytes {
                return Err(FramingError::TooLarge {
                    key: key_name(key),
                    length: header.total_length,
                    limit: self.max_slice_bytes,
                });
            }
            self.current = Some((header.clone(), 0));
            begun = Some(header);
        }
        let Some((header, received)) = self.current.as_mut() else {
            return Err(FramingError::DataBeforeHeader);
        };
        let now = *received + chunk.data.len() as u64;
        if now > header.total_length {
            return Err(FramingError::TooLong {
                key: header.key.as_ref().map(key_name).unwrap_or_default(),
                expected: header.total_length,
                received: now,
            });
        }
        *received = now;
        let complete = now == header.total_length;
        if complete {
            self.current = None;
        }
        Ok(Piece {
            header: begun,
            data: chunk.data,
            complete,
        })
    }

    /// Ends the stream: an error if a slice is still missing bytes.
    pub fn finish(self) -> Result<(), FramingError> {
        match &self.current {
            Some((h, received)) => Err(truncated(h, *received)),
            None => Ok(()),
        }
    }
}

/// Puts the chunks of a slice stream back together: feed every chunk to [`push`](Self::push),
/// which returns each slice as soon as its last byte arrived, then call
/// [`finish`](Self::finish) at the end of the stream. Checks lengths only; the receiver checks
/// the content hash over the decoded values.
#[derive(Debug)]
pub struct SliceAssembler {
    framer: SliceFramer,
    /// The slice being received: its header and bytes so far.
    header: Option<SliceHeader>,
    bytes: Vec<u8>,
}

/// The most bytes [`SliceAssembler`] reserves on a header's word alone.
const RESERVE_AHEAD: u64 = 16 << 20;

/// The largest slice [`SliceAssembler::new`] accepts: 1 GiB.
pub const MAX_SLICE_BYTES: u64 = 1 << 30;

impl Default for SliceAssembler {
    fn default() -> Self {
        SliceAssembler::new()
    }
}

impl SliceAssembler {
    /// An assembler that accepts slices of up to [`MAX_SLICE_BYTES`].
    pub fn new() -> SliceAssembler {
        SliceAssembler::with_limit(MAX_SLICE_BYTES)
    }

    /// An assembler that refuses a header announcing more than `max_slice_bytes` (so that a
    /// peer cannot make it reserve any amount of memory).
    pub fn with_limit(max_slice_bytes: u64) -> SliceAssembler {
        SliceAssembler {
            framer: SliceFramer::with_limit(max_slice_bytes),
            header: None,
            bytes: Vec::new(),
        }
    }

    /// Takes the next chunk; returns the slices it completes (none or one; a header chunk of an
    /// empty slice completes it at once).
    pub fn push(&mut self, chunk: SliceChunk) -> Result<Option<(SliceHeader, Vec<u8>)>, FramingError> {
        let piece = self.framer.push(chunk)?;
        if let Some(h) = piece.header {
            // Reserved as announced up to a few chunks: a peer's header alone cannot make this
            // side reserve a large buffer; more grows as the bytes arrive.
            self.bytes = Vec::with_capacity(h.total_length.min(RESERVE_AHEAD) as usize);
            self.header = Some(h);
        }
        self.bytes.extend_from_slice(&piece.data);
        if !piece.complete {
            return Ok(None);
        }
        let header = self.header.take().expect("a slice under way has a header");
        Ok(Some((header, std::mem::take(&mut self.bytes))))
    }

    /// Ends the stream: an error if a slice is still missing bytes.
    pub fn finish(self) -> Result<(), FramingError> {
        self.framer.finish()
    }
}

fn truncated(header: &SliceHeader, received: u64) -> FramingError {
    FramingError::Truncated {
        key: header.key.as_ref().map(key_name).unwrap_or_default(),
        expected: header.total_length,
        received,
    }
}

/// `KPvK[w=0x1000 b=0x0]`: a key for messages, without chess knowledge.
fn key_name(key: &SliceKey) -> String {
    format!(
        "{}[w={:#x} b={:#x}]",
        key.material, key.white_pawns, key.black_pawns
    )
}

#[cfg(test)]
mod tests;

pub mod auth;
pub mod exposition;
pub mod keys;
pub mod task;
pub mod wire;
