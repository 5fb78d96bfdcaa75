//! One thread's reader of single values out of tables, with its own cache of decompressed blocks:
//! no lock, and a bounded amount of memory whatever the size of the tables read.

use rustc_hash::FxHashMap;

use crate::table::BlockScratch;
use crate::{StorageError, Table};

/// Reads values by index out of any number of [`Table`]s, keeping the last `blocks` blocks it
/// decompressed (least recently used evicted first).
///
/// It takes `&mut self`: each thread has its own. With tables of the default block size a
/// reader of `blocks` blocks holds at most `blocks` x 128 KiB of values.
pub struct ValueReader {
    slots: Vec<Slot>,
    /// (table id, block) -> its slot.
    index: FxHashMap<(u64, u64), usize>,
    capacity: usize,
    clock: u64,
    dctx: Option<zstd::bulk::Decompressor<'static>>,
    scratch: BlockScratch,
    /// Blocks decompressed so far.
    misses: u64,
}

struct Slot {
    key: (u64, u64),
    used: u64,
    values: Vec<u16>,
}

impl ValueReader {
    /// A reader caching up to `blocks` blocks (at least one).
    pub fn new(blocks: usize) -> ValueReader {
        ValueReader {
            slots: Vec::new(),
            index: FxHashMap::default(),
            capacity: blocks.max(1),
            clock: 0,
            dctx: None,
            scratch: BlockScratch::default(),
            misses: 0,
        }
    }

    /// The value at `index` of slice `slice` of `table` (the same as [`Table::value`]): from the
    /// cache, or one block read, checked and decompressed.
    pub fn value(&mut self, table: &Table, slice: usize, index: u64) -> Result<u16, StorageError> {
        let mut out = [0u16];
        self.values(table, slice, index, &mut out)?;
        Ok(out[0])
    }

    /// The values at `first..first + out.len()` of slice `slice` of `table`, into `out`: each
    /// block they span looked up (or read) once. Indices past the slice's end are an error.
    pub fn values(
        &mut self,
        table: &Table,
        slice: usize,
        first: u64,
        out: &mut [u16],
    ) -> Result<(), StorageError> {
        let entry = table.slice_entry(slice)?;
        // Saturating: an index near u64::MAX is out of range, not an overflow.
        let end = first.saturating_add(out.len() as u64);
        if end > entry.count {
            return Err(StorageError::InvalidInput(format!(
                "value index {} out of range for slice {slice} of {} values in {}",
                end - 1,
                entry.count,
                table
                    .path()
                    .map_or("<memory>".into(), |p| p.display().to_string())
            )));
        }
        let bv = u64::from(table.block_values());
        let mut at = entry.first_value() + first;
        let mut done = 0;
        while done < out.len() {
            let (block, offset) = (at / bv, (at % bv) as usize);
            let values = self.block(table, block)?;
            let take = (values.len() - offset).min(out.len() - done);
            out[done..done + take].copy_from_slice(&values[offset..offset + take]);
            done += take;
            at += take as u64;
        }
        Ok(())
    }

    /// The values at `indices` of slice `slice` of `table`, into `out` (as long): the block
    /// of each looked up once for a run of indices in the same block. Indices past the slice's
    /// end are an error.
    pub fn gather(
        &mut self,
        table: &Table,
        slice: usize,
        indices: &[u64],
        out: &mut [u16],
    ) -> Result<(), StorageError> {
        debug_assert_eq!(indices.len(), out.len());
        let entry = table.slice_entry(slice)?;
        if let Some(&bad) = indices.iter().find(|&&i| i >= entry.count) {
            return Err(StorageError::InvalidInput(format!(
                "value index {bad} out of range for slice {slice} of {} values in {}",
                entry.count,
                table
                    .path()
                    .map_or("<memory>".into(), |p| p.display().to_string())
            )));
        }
        let bv = u64::from(table.block_values());
        let first = entry.first_value();
        let mut k = 0;
        while k < indices.len() {
            let block = (first + indices[k]) / bv;
            let values = self.block(table, block)?;
            let base = block * bv;
            // The indices in this block, without a division each (a run of indices is mostly
            // one block).
            while k < indices.len() && (first + indices[k]).wrapping_sub(base) < bv {
                out[k] = values[(first + indices[k] - base) as usize];
                k += 1;
            }
        }
        Ok(())
    }

    /// The values of block `block` of `table`: from the cache, or read, checked and
    /// decompressed into the least recently used slot.
    fn block(&mut self, table: &Table, block: u64) -> Result<&[u16], StorageError> {
        let key = (table.id(), block);
        self.clock += 1;
        if let Some(&i) = self.index.get(&key) {
            let slot = &mut self.slots[i];
            slot.used = self.clock;
            return Ok(&slot.values);
        }
        let dctx = match &mut self.dctx {
            Some(d) => d,
            None => self.dctx.insert(table.decompressor()?),
        };
        // The slot to fill: a new one, or the least recently used one's (its buffer reused).
        let i = if self.slots.len() < self.capacity {
            self.slots.push(Slot {
                key,
                used: 0,
                values: Vec::new(),
            });
            self.slots.len() - 1
        } else {
            let (i, oldest) = self
                .slots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.used)
                .expect("a full cache has slots");
            self.index.remove(&oldest.key);
            i
        };
        let slot = &mut self.slots[i];
        // Marked empty until the block is in: a failed read leaves no stale block behind.
        slot.key = (u64::MAX, u64::MAX);
        slot.used = 0;
        table.decode_block_into(block, dctx, &mut self.scratch, &mut slot.values)?;
        self.misses += 1;
        slot.key = key;
        slot.used = self.clock;
        self.index.insert(key, i);
        Ok(&self.slots[i].values)
    }

    /// Blocks decompressed by this reader so far.
    pub fn misses(&self) -> u64 {
        self.misses
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{write_table_with, Metric, SliceData, TableMeta, WriteOptions};

    #[test]
    fn reads_every_value_of_two_tables_through_a_small_cache() {
        let dir = tempfile::tempdir().unwrap();
        let options = WriteOptions {
            block_values: 64,
            ..WriteOptions::default()
        };
        let meta = |m: &str| TableMeta {
            material: m.to_owned(),
            metric: Metric::Dtm,
            index_layout: 1,
        };
        let a: Vec<u16> = (0..1000).map(|i| (i * 7 % 1013) as u16).collect();
        let b: Vec<u16> = (0..300).map(|i| 5000 + i as u16).collect();
        let c: Vec<u16> = (0..2000).map(|i| (i * 3) as u16).collect();
        let pa = dir.path().join("a.zmt");
        let pb = dir.path().join("b.zmt");
        write_table_with(
            &pa,
            &meta("KQvK"),
            &[
                SliceData {
                    key: [1, 0],
                    values: &a,
                },
                SliceData {
                    key: [2, 0],
                    values: &b,
                },
            ],
            &options,
        )
        .unwrap();
        write_table_with(
            &pb,
            &meta("KRvK"),
            &[SliceData {
                key: [0, 0],
                values: &c,
            }],
            &options,
        )
        .unwrap();
        let (ta, tb) = (Table::open(&pa).unwrap(), Table::open_pread(&pb).unwrap());
        let mut r = ValueReader::new(8);
        // Interleaved, forwards and backwards: every value right, however the cache evicts.
        for i in 0..1000u64 {
            assert_eq!(r.value(&ta, 0, i).unwrap(), a[i as usize]);
            assert_eq!(r.value(&tb, 0, 1999 - i).unwrap(), c[1999 - i as usize]);
            assert_eq!(r.value(&ta, 1, i % 300).unwrap(), b[(i % 300) as usize]);
            assert_eq!(r.value(&tb, 0, 2 * i).unwrap(), c[2 * i as usize]);
        }
        assert!(r.misses() > 8, "the cache evicted");
        assert!(r.slots.len() <= 8);
        assert_eq!(r.value(&ta, 1, 299).unwrap(), b[299]);
        let before = r.misses();
        assert_eq!(r.value(&ta, 1, 298).unwrap(), b[298]);
        assert_eq!(r.misses(), before, "the block just read is cached");
        assert!(matches!(r.value(&ta, 1, 300), Err(StorageError::InvalidInput(_))));
        assert!(matches!(r.value(&ta, 2, 0), Err(StorageError::InvalidInput(_))));
    }

    /// A KQvK table `a.zmt` in `dir` of blocks of `block_values`, with these slices, opened.
    fn table_of(dir: &std::path::Path, block_values: u32, slices: &[([u64; 2], &[u16])]) -> Table {
        let path = dir.join("a.zmt");
        let meta = TableMeta {
            material: "KQvK".to_owned(),
            metric: Metric::Dtm,
            index_layout: 1,
        };
        let options = WriteOptions {
            block_values,
            ..WriteOptions::default()
        };
        let slices: Vec<SliceData<'_>> = slices
            .iter()
            .map(|&(key, values)| SliceData { key, values })
            .collect();
        write_table_with(&path, &meta, &slices, &options).unwrap();
        Table::open(&path).unwrap()
    }

    #[test]
    fn runs_of_values_span_blocks_and_stop_at_the_slice_end() {
        let dir = tempfile::tempdir().unwrap();
        // Two slices: runs of the second start inside a block shared with the first.
        let a: Vec<u16> = (0..100).map(|i| 3 * i as u16 + 1).collect();
        let b: Vec<u16> = (0..1000).map(|i| (i * 11 % 997) as u16).collect();
        let t = table_of(dir.path(), 64, &[([1, 0], &a), ([2, 0], &b)]);
        let mut r = ValueReader::new(2);
        for (first, len) in [(0u64, 1usize), (0, 1000), (5, 64), (60, 200), (999, 1), (937, 63)] {
            let mut out = vec![0u16; len];
            r.values(&t, 1, first, &mut out).unwrap();
            assert_eq!(out, b[first as usize..first as usize + len], "run {first}+{len}");
        }
        let mut out = [0u16; 10];
        r.values(&t, 0, 90, &mut out).unwrap();
        assert_eq!(out[..], a[90..]);
        // One past the end, in either slice: an error, and `out` is not trusted.
        assert!(matches!(
            r.values(&t, 0, 91, &mut out),
            Err(StorageError::InvalidInput(_))
        ));
        assert!(matches!(
            r.values(&t, 1, 995, &mut out),
            Err(StorageError::InvalidInput(_))
        ));
    }

    /// Values gathered at scattered indices (in runs within a block, across blocks, back and
    /// forth) are those at each index; one past the end is an error.
    #[test]
    fn gathered_values_are_those_at_each_index() {
        let dir = tempfile::tempdir().unwrap();
        let a: Vec<u16> = (0..100).map(|i| 3 * i as u16 + 1).collect();
        let b: Vec<u16> = (0..1000).map(|i| (i * 11 % 997) as u16).collect();
        let t = table_of(dir.path(), 64, &[([1, 0], &a), ([2, 0], &b)]);
        let mut r = ValueReader::new(2);
        let indices: Vec<u64> = [0u64, 1, 63, 5, 64, 900, 127, 128, 999, 0, 300, 301, 36]
            .into_iter()
            .chain((0..1000u32).step_by(37).rev().map(u64::from))
            .collect();
        let mut out = vec![0u16; indices.len()];
        r.gather(&t, 1, &indices, &mut out).unwrap();
        let expected: Vec<u16> = indices.iter().map(|&i| b[i as usize]).collect();
        assert_eq!(out, expected);
        let mut one = [0u16; 2];
        r.gather(&t, 0, &[99, 0], &mut one).unwrap();
        assert_eq!(one, [a[99], a[0]]);
        assert!(matches!(
            r.gather(&t, 0, &[5, 100], &mut one),
            Err(StorageError::InvalidInput(_))
        ));
    }

    /// Found by the fuzz target `table` (fuzz/): an index near `u64::MAX` overflowed `first +
    /// out.len()`: a panic with overflow checks; without them the sum wrapped past the range
    /// check, and the read gave a value of the slice before or indexed past the block table.
    #[test]
    fn an_index_near_u64_max_is_out_of_range() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<u16> = (0..9).collect();
        let t = table_of(dir.path(), 1 << 20, &[([0, 0], &values)]);
        let mut r = ValueReader::new(2);
        assert!(matches!(
            r.value(&t, 0, u64::MAX),
            Err(StorageError::InvalidInput(_))
        ));
        for first in [u64::MAX, u64::MAX - 1] {
            assert!(matches!(
                r.values(&t, 0, first, &mut [0u16; 2]),
                Err(StorageError::InvalidInput(_))
            ));
        }
        assert!(matches!(
            r.gather(&t, 0, &[u64::MAX], &mut [0u16]),
            Err(StorageError::InvalidInput(_))
        ));
        assert_eq!(r.value(&t, 0, 8).unwrap(), 8);
    }

    #[test]
    fn a_corrupt_block_is_an_error_not_a_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.zmt");
        let values: Vec<u16> = (0..5000).map(|i| (i % 97) as u16).collect();
        table_of(dir.path(), 1024, &[([0, 0], &values)]);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[200] ^= 0x40; // Inside the first block's frame.
        let table = Table::from_bytes(bytes).unwrap();
        let mut r = ValueReader::new(4);
        assert!(matches!(r.value(&table, 0, 3), Err(StorageError::Corrupt { .. })));
        assert_eq!(r.value(&table, 0, 4000).unwrap(), values[4000]);
        // Still an error, not a value left in the slot by the failed read.
        assert!(matches!(r.value(&table, 0, 5), Err(StorageError::Corrupt { .. })));
        assert_eq!(r.value(&table, 0, 1024).unwrap(), values[1024]);
    }
}
