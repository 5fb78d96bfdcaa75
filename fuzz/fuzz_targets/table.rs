//! The table reader (storage/src/table.rs): `Table::from_bytes` on any bytes, then reads.
//!
//! The first input byte chooses what the target repairs before opening, so that the fuzzer gets
//! past the checksums to the tables and blocks behind them: bit 0 rewrites the header CRC, each
//! block's CRC, the tables hash and the file hash to match the bytes; bit 1 (with bit 0) also
//! rewrites each slice's content hash to match its values. The rest is the file.
//!
//! Asserts: no input panics, reads past the end or allocates without bound; out-of-range reads
//! are errors; `read_slice`, `stream_slice`, `read_range`, `value` and `ValueReader` agree on
//! every value they return; a slice found by `find_slice` is the one with that key; after the
//! repair of bit 1, `verify_checksum` passes and every slice reads whole.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zermelo_storage::{SliceHasher, Table, ValueReader};

const HEADER_LEN: usize = 128;
const SLICE_ENTRY_LEN: usize = 64;
const BLOCK_ENTRY_LEN: usize = 16;
const TAIL_LEN: usize = 72;
/// Slices and tables read past this many values are left alone: what they could allocate is
/// the format's business (a block may hold a million values), not this target's.
const MAX_VALUES: u64 = 1 << 18;

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// Where the slice table starts, from the header's counts and the length.
fn tables_at(b: &[u8]) -> Option<(usize, usize, usize)> {
    if b.len() < HEADER_LEN + TAIL_LEN {
        return None;
    }
    let slices = usize::try_from(u64_at(b, 56)).ok()?;
    let blocks = usize::try_from(u64_at(b, 72)).ok()?;
    let len = slices
        .checked_mul(SLICE_ENTRY_LEN)?
        .checked_add(blocks.checked_mul(BLOCK_ENTRY_LEN)?)?;
    let t = b.len().checked_sub(TAIL_LEN)?.checked_sub(len)?;
    (t >= HEADER_LEN).then_some((t, slices, blocks))
}

/// Rewrites the header CRC, the block CRCs, the tables hash and the file hash.
fn repair(b: &mut [u8]) {
    if b.len() >= HEADER_LEN {
        let crc = crc32fast::hash(&b[..124]);
        b[124..128].copy_from_slice(&crc.to_le_bytes());
    }
    let Some((t, slices, blocks)) = tables_at(b) else {
        return;
    };
    for i in 0..blocks {
        let e = t + slices * SLICE_ENTRY_LEN + i * BLOCK_ENTRY_LEN;
        let offset = u64_at(b, e);
        let len = u32::from_le_bytes(b[e + 8..e + 12].try_into().unwrap()) as u64;
        if let Some(end) = offset.checked_add(len).filter(|&end| end <= b.len() as u64) {
            let crc = crc32fast::hash(&b[offset as usize..end as usize]);
            b[e + 12..e + 16].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let n = b.len();
    let hash = *blake3::hash(&b[t..n - TAIL_LEN]).as_bytes();
    b[n - TAIL_LEN..n - 40].copy_from_slice(&hash);
    let hash = *blake3::hash(&b[..n - 40]).as_bytes();
    b[n - 40..n - 8].copy_from_slice(&hash);
}

/// Rewrites each slice's content hash to its values' (then the hashes over them); true if every
/// slice could be read.
fn repair_slices(b: &mut [u8], table: &Table) -> bool {
    let Some((t, _, _)) = tables_at(b) else {
        return false;
    };
    if table.positions() > MAX_VALUES {
        return false;
    }
    let meta = table.meta();
    let mut all = true;
    for (i, e) in table.slices().iter().enumerate() {
        let Ok(values) = table.read_range(i, 0, e.count) else {
            all = false;
            continue;
        };
        let mut h = if table.format_version() == 1 {
            SliceHasher::format_1(&meta.material, e.key, e.count)
        } else {
            SliceHasher::new(meta.index_layout, &meta.material, e.key, e.count)
        };
        h.update(&values);
        let at = t + i * SLICE_ENTRY_LEN + 32;
        b[at..at + 32].copy_from_slice(&h.finalize());
    }
    repair(b);
    all
}

/// Reads what can be read, checking that the readers agree.
fn exercise(table: &Table) {
    let slices = table.slices();
    let n = slices.len();
    let _ = (
        table.meta(),
        table.block_values(),
        table.block_count(),
        table.file_len(),
    );
    assert!(table.value(n, 0).is_err());
    assert!(table.read_slice(n).is_err());
    assert!(table.read_range(n, 0, 0).is_err());
    let mut reader = ValueReader::new(2);
    for (i, e) in slices.iter().enumerate().take(16) {
        assert_eq!(table.find_slice(e.key), Some(i));
        assert!(table.value(i, e.count).is_err());
        assert!(table.read_range(i, e.count, 1).is_err());
        assert!(table.read_range(i, 1, u64::MAX).is_err());
        assert!(reader.value(table, i, e.count).is_err());
        assert!(reader.value(table, i, u64::MAX).is_err());
        assert!(reader.values(table, i, u64::MAX, &mut [0; 2]).is_err());
        if e.count > MAX_VALUES {
            continue;
        }
        let range = table.read_range(i, 0, e.count);
        let whole = table.read_slice(i);
        let mut streamed = Vec::new();
        let stream = table.stream_slice(i, |v| streamed.extend_from_slice(v));
        if let Ok(whole) = &whole {
            assert_eq!(whole.len() as u64, e.count);
            assert!(stream.is_ok(), "slice {i} reads whole but does not stream");
            assert_eq!(&streamed, whole);
            assert_eq!(
                range.as_ref().ok(),
                Some(whole),
                "slice {i}: read_range and read_slice differ"
            );
        }
        if let Ok(range) = &range {
            assert_eq!(range.len() as u64, e.count);
            for j in [0, e.count / 3, e.count / 2, e.count.saturating_sub(1)] {
                if j < e.count {
                    let v = range[j as usize];
                    assert_eq!(table.value(i, j).ok(), Some(v), "slice {i} value {j}");
                    assert_eq!(
                        reader.value(table, i, j).ok(),
                        Some(v),
                        "slice {i} value {j} (ValueReader)"
                    );
                    if j + 2 <= e.count {
                        assert_eq!(
                            table.read_range(i, j, 2).ok().as_deref(),
                            Some(&range[j as usize..j as usize + 2])
                        );
                    }
                }
            }
        }
    }
    if table.positions() <= MAX_VALUES && table.verify_checksum().is_ok() {
        for i in 0..n {
            assert!(
                table.read_slice(i).is_ok(),
                "verify_checksum passes but slice {i} does not read"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, file)) = data.split_first() else {
        return;
    };
    let mut bytes = file.to_vec();
    if flags & 1 != 0 {
        repair(&mut bytes);
    }
    let Ok(table) = Table::from_bytes(bytes.clone()) else {
        return;
    };
    exercise(&table);
    if flags & 3 == 3 && repair_slices(&mut bytes, &table) {
        let table = Table::from_bytes(bytes).expect("the slice hashes were all that changed");
        table.verify_checksum().expect("every slice hash was repaired");
        exercise(&table);
    }
});
