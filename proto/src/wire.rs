//! The bytes of a slice on the wire and in slice files.
//!
//! * On the wire (`SliceHeader::total_length` bytes), a slice's values are their little-endian
//!   `u16`s compressed as one zstd frame ([`encode_values`], [`decode_values`]).
//! * A *slice file* (a worker's cache, the coordinator's store) is a small header, then the wire
//!   bytes: `b"ZRMLSLC1"`, the content hash (32 bytes), the positions (u64 LE), the wire bytes.
//!   The hash in the file is what the file claims; readers check it against the decoded values.
//!
//! ```
//! use zermelo_proto::wire::{decode_values, encode_values, SliceFile};
//! let values: Vec<u16> = (0..1000).map(|i| i % 7).collect();
//! let wire = encode_values(&values);
//! assert_eq!(decode_values(&wire, 1000)?, values);
//! let file = SliceFile { hash: [9; 32], positions: 1000, data: wire.clone() }.to_bytes();
//! let back = SliceFile::from_bytes(&file)?;
//! assert_eq!((back.hash, back.positions, back.data), ([9; 32], 1000, wire));
//! # Ok::<(), zermelo_proto::wire::WireError>(())
//! ```

/// The zstd level of slices on the wire: fast, since every slice is compressed once and sent
/// a few times.
pub const WIRE_ZSTD_LEVEL: i32 = 1;

use std::io::{self, Read, Write};

const FILE_MAGIC: [u8; 8] = *b"ZRMLSLC1";
/// The bytes of a slice file before its wire bytes.
pub const SLICE_FILE_HEADER_LEN: usize = 8 + 32 + 8;

/// Bytes that are not a slice's encoding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("slice bytes do not decompress: {0}")]
    Decompress(String),
    #[error("slice bytes hold {found} values, not the {expected} announced")]
    WrongCount { expected: u64, found: u64 },
    #[error("not a slice file (bad magic or shorter than its header)")]
    NotASliceFile,
}

/// A slice's values as they travel: zstd over their little-endian bytes.
pub fn encode_values(values: &[u16]) -> Vec<u8> {
    let mut raw = Vec::with_capacity(values.len() * 2);
    for v in values {
        raw.extend_from_slice(&v.to_le_bytes());
    }
    zstd::bulk::compress(&raw, WIRE_ZSTD_LEVEL).expect("zstd compression of a buffer in memory")
}

/// The values of [`encode_values`] back, checked to be `positions` many.
///
/// The memory grows with the values as they decode: `positions` and the frame's declared size
/// are only what the sender claims, and reserving either up front let a few bytes claiming a
/// trillion positions abort the process on an allocation of terabytes (found by the fuzz
/// target `wire`, fuzz/).
pub fn decode_values(bytes: &[u8], positions: u64) -> Result<Vec<u16>, WireError> {
    let mut values = Vec::with_capacity(positions.min(RESERVE_VALUES) as usize);
    let mut decoder = ValuesDecoder::new(positions)?;
    decoder.push(bytes, &mut |v: &[u16]| {
        values.extend_from_slice(v);
        Ok::<(), WireError>(())
    })?;
    decoder.finish()?;
    Ok(values)
}

/// The most values [`decode_values`] reserves before they decode (32 MiB).
const RESERVE_VALUES: u64 = 16 << 20;

/// [`encode_values`] for values that come in pieces (a slice too big to hold whole): the same
/// format, one zstd frame over the little-endian `u16`s, written to `W` as it goes.
pub struct ValuesEncoder<W: Write> {
    zstd: zstd::stream::write::Encoder<'static, W>,
    raw: Vec<u8>,
}

impl<W: Write> ValuesEncoder<W> {
    pub fn new(out: W) -> io::Result<ValuesEncoder<W>> {
        Ok(ValuesEncoder {
            zstd: zstd::stream::write::Encoder::new(out, WIRE_ZSTD_LEVEL)?,
            raw: Vec::new(),
        })
    }

    /// Appends values.
    pub fn push(&mut self, values: &[u16]) -> io::Result<()> {
        for piece in values.chunks(1 << 16) {
            self.raw.clear();
            self.raw.extend(piece.iter().flat_map(|v| v.to_le_bytes()));
            self.zstd.write_all(&self.raw)?;
        }
        Ok(())
    }

    /// The writer: the bytes written so far, when it is a buffer to drain.
    pub fn get_mut(&mut self) -> &mut W {
        self.zstd.get_mut()
    }

    /// Ends the frame; gives back the writer.
    pub fn finish(self) -> io::Result<W> {
        self.zstd.finish()
    }
}

/// Bytes of decoded values [`ValuesDecoder`] holds at most.
const DECODE_BUFFER: usize = 1 << 20;

/// [`decode_values`] for bytes that come in pieces (an upload, a file read a block at a time),
/// in bounded memory: the values go to a sink as they are decoded, counted against the
/// announced number, so a stream that decodes to more than announced is refused as soon as it
/// passes it.
pub struct ValuesDecoder {
    zstd: zstd::stream::raw::Decoder<'static>,
    out: Vec<u8>,
    values: Vec<u16>,
    /// The first byte of a value whose second byte has not been decoded yet.
    odd: Option<u8>,
    found: u64,
    positions: u64,
    /// The last byte decoded ended a frame.
    at_frame_end: bool,
}

/// The bytes of a buffer for decoding `positions` values: [`DECODE_BUFFER`], or less for a
/// small slice (its raw bytes and a little more; any size works, a smaller one takes more
/// rounds), so that decoding the many small slices of a pawn ending does not clear a megabyte
/// each time.
fn buffer_for(positions: u64) -> usize {
    usize::try_from(positions.saturating_mul(2).saturating_add(4096))
        .unwrap_or(DECODE_BUFFER)
        .min(DECODE_BUFFER)
}

impl ValuesDecoder {
    /// A decoder of `positions` values.
    pub fn new(positions: u64) -> Result<ValuesDecoder, WireError> {
        let out = buffer_for(positions);
        Ok(ValuesDecoder {
            zstd: zstd::stream::raw::Decoder::new().map_err(|e| WireError::Decompress(e.to_string()))?,
            out: vec![0; out],
            values: Vec::with_capacity(out / 2),
            odd: None,
            found: 0,
            positions,
            at_frame_end: false,
        })
    }

    /// Decodes the next bytes, handing the values they complete to `sink`.
    pub fn push<E: From<WireError>>(
        &mut self,
        mut input: &[u8],
        sink: &mut impl FnMut(&[u16]) -> Result<(), E>,
    ) -> Result<(), E> {
        use zstd::stream::raw::Operation;
        if input.is_empty() {
            return Ok(());
        }
        loop {
            let status = self
                .zstd
                .run_on_buffers(input, &mut self.out)
                .map_err(|e| WireError::Decompress(e.to_string()))?;
            input = &input[status.bytes_read..];
            if status.bytes_read > 0 || status.bytes_written > 0 {
                self.at_frame_end = status.remaining == 0;
            } else if !input.is_empty() {
                return Err(WireError::Decompress("the decoder made no progress".into()).into());
            }
            self.emit(status.bytes_written, sink)?;
            // Done when the input is used up and the decoder had no more output to give.
            if input.is_empty() && status.bytes_written < self.out.len() {
                return Ok(());
            }
        }
    }

    fn emit<E: From<WireError>>(
        &mut self,
        len: usize,
        sink: &mut impl FnMut(&[u16]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut bytes = &self.out[..len];
        if bytes.is_empty() {
            return Ok(());
        }
        self.values.clear();
        if let Some(first) = self.odd.take() {
            self.values.push(u16::from_le_bytes([first, bytes[0]]));
            bytes = &bytes[1..];
        }
        let pairs = bytes.chunks_exact(2);
        self.odd = pairs.remainder().first().copied();
        self.values
            .extend(pairs.map(|b| u16::from_le_bytes([b[0], b[1]])));
        self.found += self.values.len() as u64;
        if self.found > self.positions {
            return Err(WireError::WrongCount {
                expected: self.positions,
                found: self.found,
            }
            .into());
        }
        sink(&self.values)
    }

    /// Ends the stream: an error if it stopped inside a frame or held another number of values
    /// than announced.
    pub fn finish(self) -> Result<(), WireError> {
        if !self.at_frame_end {
            return Err(WireError::Decompress("the bytes end inside a zstd frame".into()));
        }
        if self.odd.is_some() || self.found != self.positions {
            return Err(WireError::WrongCount {
                expected: self.positions,
                found: self.found,
            });
        }
        Ok(())
    }
}

/// The values of wire bytes read from `source` (a slice file after its header, say), handed to
/// `sink` in pieces: [`decode_values`] in bounded memory.
pub fn decode_values_from<E: From<WireError> + From<io::Error>>(
    mut source: impl Read,
    positions: u64,
    sink: &mut impl FnMut(&[u16]) -> Result<(), E>,
) -> Result<(), E> {
    let mut decoder = ValuesDecoder::new(positions)?;
    let mut buf = vec![0u8; buffer_for(positions)];
    loop {
        let n = match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        decoder.push(&buf[..n], sink)?;
    }
    Ok(decoder.finish()?)
}

/// A slice file: what it claims the content hash is, its positions, and its wire bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceFile {
    pub hash: [u8; 32],
    pub positions: u64,
    pub data: Vec<u8>,
}

impl SliceFile {
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(SLICE_FILE_HEADER_LEN + self.data.len());
        out.extend_from_slice(&FILE_MAGIC);
        out.extend_from_slice(&self.hash);
        out.extend_from_slice(&self.positions.to_le_bytes());
        out.extend_from_slice(&self.data);
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<SliceFile, WireError> {
        if bytes.len() < SLICE_FILE_HEADER_LEN || bytes[..8] != FILE_MAGIC {
            return Err(WireError::NotASliceFile);
        }
        let hash: [u8; 32] = bytes[8..40].try_into().expect("32 bytes");
        let positions = u64::from_le_bytes(bytes[40..48].try_into().expect("8 bytes"));
        Ok(SliceFile {
            hash,
            positions,
            data: bytes[SLICE_FILE_HEADER_LEN..].to_vec(),
        })
    }
}

/// A file name for a slice: `KPvK-0000000000001000-0000000000000000.slice`.
pub fn slice_file_name(key: &zermelo_chess::SliceKey) -> String {
    let [w, b] = key.raw();
    format!("{}-{w:016x}-{b:016x}.slice", key.material)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn damaged_bytes_are_refused() {
        let wire = encode_values(&[1, 2, 3]);
        assert!(matches!(
            decode_values(&wire, 4),
            Err(WireError::WrongCount {
                expected: 4,
                found: 3
            })
        ));
        assert!(decode_values(&wire, 2).is_err());
        assert!(decode_values(&wire[..wire.len() - 1], 3).is_err());
        assert_eq!(SliceFile::from_bytes(b"ZRMLSLC1"), Err(WireError::NotASliceFile));
    }

    /// The input of a crash the fuzz target `wire` (fuzz/) found: 64 bytes that are no zstd
    /// frame, announced as 1,099,646,500,908 positions. `decode_values` reserved twice that many
    /// bytes before decompressing and the allocation aborted the process; it is an error.
    #[test]
    fn bytes_claiming_a_trillion_positions_reserve_nothing_for_them() {
        let crash: [u8; 74] = [
            0x02, 0x2c, 0x00, 0x0a, 0x08, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x28,
            0xb5, 0x2f, 0xfd, 0x60, 0x58, 0x01, 0x7d, 0x01, 0x00, 0x34, 0x02, 0x01, 0x00, 0x0e, 0x00, 0x0f,
            0x00, 0x10, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00, 0x03, 0x00, 0x04, 0x00, 0x05, 0x00, 0x08,
            0x00, 0x06, 0x00, 0x07, 0x00, 0x08, 0x00, 0x09, 0x00, 0x0a, 0x08, 0x00, 0x00, 0x0c, 0x00, 0x0d,
            0x02, 0x00, 0x17, 0x28, 0x4a, 0x55, 0x27, 0xa9, 0x0e, 0x0b,
        ];
        // The target's layout: a selector byte, the positions (u64 LE), a piece size, the bytes.
        let positions = u64::from_le_bytes(crash[1..9].try_into().unwrap());
        assert_eq!(positions, 1_099_646_500_908);
        assert!(decode_values(&crash[11..], positions).is_err());
        // A real frame announced as more positions than it holds: refused as such.
        let wire = encode_values(&[5; 1000]);
        assert_eq!(
            decode_values(&wire, u64::MAX),
            Err(WireError::WrongCount {
                expected: u64::MAX,
                found: 1000
            })
        );
        assert_eq!(decode_values(&wire, 1000).unwrap(), vec![5; 1000]);
        assert_eq!(decode_values(&encode_values(&[]), 0).unwrap(), Vec::<u16>::new());
    }

    /// Values with long runs and noise, like a slice's.
    fn sample(n: usize) -> Vec<u16> {
        let mut x = 12345u64;
        (0..n)
            .map(|i| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if (i / 1000) % 3 == 0 {
                    0
                } else {
                    (x >> 52) as u16
                }
            })
            .collect()
    }

    fn decode_in_pieces(wire: &[u8], positions: u64, piece: usize) -> Result<Vec<u16>, WireError> {
        let mut got = Vec::new();
        let mut decoder = ValuesDecoder::new(positions)?;
        for part in wire.chunks(piece) {
            decoder.push(part, &mut |v: &[u16]| {
                got.extend_from_slice(v);
                Ok::<(), WireError>(())
            })?;
        }
        decoder.finish()?;
        Ok(got)
    }

    #[test]
    fn streaming_matches_the_whole_encoding() {
        // Over a megabyte of values, so that the decoder's buffer fills and is emptied many times.
        let values = sample(1_500_000);
        let mut encoder = ValuesEncoder::new(Vec::new()).unwrap();
        for part in values.chunks(77_777) {
            encoder.push(part).unwrap();
        }
        let streamed = encoder.finish().unwrap();
        // Each encoding decodes with the other's decoder.
        assert_eq!(decode_values(&streamed, values.len() as u64).unwrap(), values);
        let whole = encode_values(&values);
        for piece in [1, 4096, 1 << 20, whole.len()] {
            assert_eq!(
                decode_in_pieces(&whole, values.len() as u64, piece).unwrap(),
                values
            );
        }
        let mut got = Vec::new();
        decode_values_from(&streamed[..], values.len() as u64, &mut |v: &[u16]| {
            got.extend_from_slice(v);
            Ok::<(), Box<dyn std::error::Error>>(())
        })
        .unwrap();
        assert_eq!(got, values);
    }

    #[test]
    fn streaming_refuses_what_whole_decoding_refuses() {
        let values = sample(300_000);
        let wire = encode_values(&values);
        let n = values.len() as u64;
        // Too many values: refused as soon as the count passes the announced one.
        let mut seen = 0u64;
        let mut decoder = ValuesDecoder::new(10).unwrap();
        let early = decoder.push(&wire, &mut |v: &[u16]| {
            seen += v.len() as u64;
            Ok::<(), WireError>(())
        });
        assert!(matches!(early, Err(WireError::WrongCount { expected: 10, .. })));
        assert_eq!(seen, 0, "no value of an oversized stream reaches the sink");
        // Too few, cut short, damaged, or not zstd at all.
        assert!(matches!(
            decode_in_pieces(&wire, n + 1, 1000),
            Err(WireError::WrongCount { .. })
        ));
        assert!(decode_in_pieces(&wire[..wire.len() - 3], n, 1000).is_err());
        let mut damaged = wire.clone();
        let mid = damaged.len() / 2;
        damaged[mid] ^= 0x55;
        let got = decode_in_pieces(&damaged, n, 1000);
        assert!(got.is_err() || got.unwrap() != values);
        assert!(decode_in_pieces(b"not zstd at all", n, 4).is_err());
        assert!(
            decode_in_pieces(b"", 0, 4).is_err(),
            "no frame is not an empty slice"
        );
        assert_eq!(
            decode_in_pieces(&encode_values(&[]), 0, 4).unwrap(),
            Vec::<u16>::new()
        );
    }
}
