//! Round trips, determinism, atomicity and corruption of table files.

use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use zermelo_storage::{
    slice_hash, table_file_name, write_table, write_table_with, Metric, SliceData, SliceKey, StorageError,
    Table, TableMeta, TableWriter, WriteOptions, FORMAT_VERSION,
};

/// A small deterministic generator (xorshift64*), so that failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Values shaped like a DTM slice: runs of a few small values, draws, broken positions.
fn dtm_like(seed: u64, n: usize) -> Vec<u16> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut v = Vec::with_capacity(n);
    let mut cur = 0u16;
    for _ in 0..n {
        if rng.below(8) == 0 {
            cur = match rng.below(10) {
                0..=3 => 0,
                4 => u16::MAX,
                _ => 1 + rng.below(60) as u16,
            };
        }
        v.push(cur);
    }
    v
}

fn meta(material: &str) -> TableMeta {
    TableMeta {
        material: material.to_owned(),
        metric: Metric::Dtm,
        index_layout: 1,
    }
}

fn key(i: u64) -> SliceKey {
    [(i + 1) << 8, (i * 7) << 40]
}

/// Slices with these counts, keys ascending.
fn slices_of(counts: &[usize]) -> Vec<(SliceKey, Vec<u16>)> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &n)| (key(i as u64), dtm_like(i as u64, n)))
        .collect()
}

fn as_data(slices: &[(SliceKey, Vec<u16>)]) -> Vec<SliceData<'_>> {
    slices
        .iter()
        .map(|(key, values)| SliceData { key: *key, values })
        .collect()
}

fn dir_entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Writes `slices` and checks that every way of opening the file reads them back.
fn round_trip(slices: &[(SliceKey, Vec<u16>)], options: &WriteOptions) -> (tempfile::TempDir, PathBuf) {
    let dir_guard = tempfile::tempdir().unwrap();
    let dir = dir_guard.path();
    let meta = meta("KRPvKR");
    let path = dir.join(table_file_name(&meta.material));
    let summary = write_table_with(&path, &meta, &as_data(slices), options).unwrap();
    let bytes = fs::read(&path).unwrap();
    assert_eq!(summary.bytes, bytes.len() as u64);
    assert_eq!(summary.file_hash, *blake3::hash(&bytes).as_bytes());
    assert_eq!(summary.slices, slices.len());
    assert_eq!(
        summary.positions,
        slices.iter().map(|s| s.1.len() as u64).sum::<u64>()
    );

    let tables = [
        Table::open(&path).unwrap(),
        Table::open_pread(&path).unwrap(),
        Table::from_bytes(bytes).unwrap(),
    ];
    for table in &tables {
        assert_eq!(table.meta(), &meta);
        assert_eq!(table.positions(), summary.positions);
        assert_eq!(table.slices().len(), slices.len());
        let mut first = 0;
        for (i, ((k, values), entry)) in slices.iter().zip(table.slices()).enumerate() {
            assert_eq!(entry.key, *k);
            assert_eq!(entry.count, values.len() as u64);
            assert_eq!(entry.hash, slice_hash(meta.index_layout, "KRPvKR", *k, values));
            assert_eq!(entry.first_value(), first);
            first += entry.count;
            assert_eq!(table.find_slice(*k), Some(i));
            assert_eq!(&table.read_slice(i).unwrap(), values);
            let mut streamed = Vec::new();
            table.stream_slice(i, |v| streamed.extend_from_slice(v)).unwrap();
            assert_eq!(&streamed, values);
        }
        assert_eq!(table.find_slice([1, 1]), None);
        table.verify_file_hash().unwrap();
        table.verify_checksum().unwrap();
    }
    assert_eq!(tables[0].path(), Some(path.as_path()));
    assert_eq!(tables[2].path(), None);
    assert_eq!(dir_entries(dir), ["KRPvKR.zmt"]);
    (dir_guard, path)
}

fn small_blocks() -> WriteOptions {
    WriteOptions {
        block_values: 1000,
        ..WriteOptions::default()
    }
}

#[test]
fn tables_and_writers_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Table>();
    send_sync::<StorageError>();
    send::<TableWriter>();
}

#[test]
fn round_trip_of_slices_of_many_sizes() {
    let counts = [0, 1, 999, 1000, 1001, 0, 2500, 8192, 0];
    round_trip(&slices_of(&counts), &small_blocks());
    round_trip(&slices_of(&counts), &WriteOptions::default());
    round_trip(
        &slices_of(&[65535, 65536, 65537, 200_000]),
        &WriteOptions::default(),
    );
}

#[test]
fn round_trip_of_no_slices_and_of_empty_slices() {
    let (_dir, path) = round_trip(&[], &WriteOptions::default());
    let table = Table::open(&path).unwrap();
    assert_eq!(table.slices(), &[]);
    assert_eq!(table.block_count(), 0);
    assert!(matches!(table.read_slice(0), Err(StorageError::InvalidInput(_))));

    let (_dir, path) = round_trip(&slices_of(&[0, 0, 0]), &WriteOptions::default());
    let table = Table::open(&path).unwrap();
    assert_eq!(table.block_count(), 0);
    assert_eq!(table.read_slice(1).unwrap(), Vec::<u16>::new());
    assert!(matches!(table.value(1, 0), Err(StorageError::InvalidInput(_))));
}

#[test]
fn round_trip_of_a_pawnless_table() {
    let values = dtm_like(9, 100_000);
    let slices = vec![([0, 0], values)];
    round_trip(&slices, &WriteOptions::default());
}

#[test]
fn many_tiny_slices_share_blocks() {
    let slices = slices_of(&[8192; 1000]);
    let (_dir, path) = round_trip(&slices, &WriteOptions::default());
    let table = Table::open(&path).unwrap();
    assert_eq!(table.block_count(), 1000 * 8192 / 65536);
    let mut rng = Rng(5);
    for _ in 0..20_000 {
        let s = rng.below(1000) as usize;
        let i = rng.below(8192);
        assert_eq!(table.value(s, i).unwrap(), slices[s].1[i as usize]);
    }
}

#[test]
fn read_range_gives_every_range_of_every_slice_and_refuses_one_past_the_end() {
    let slices = slices_of(&[3000, 1, 0, 12_345, 999, 2001]);
    let (_dir, path) = round_trip(&slices, &small_blocks());
    let table = Table::open(&path).unwrap();
    let mut rng = Rng(11);
    for (s, (_, values)) in slices.iter().enumerate() {
        let n = values.len() as u64;
        // The whole slice, empty ranges at both ends, then ranges across block boundaries.
        assert_eq!(table.read_range(s, 0, n).unwrap(), *values);
        assert_eq!(table.read_range(s, n, 0).unwrap(), Vec::<u16>::new());
        for _ in 0..50 {
            let start = rng.below(n + 1);
            let count = rng.below(n - start + 1);
            let got = table.read_range(s, start, count).unwrap();
            assert_eq!(
                got,
                values[start as usize..(start + count) as usize],
                "slice {s} {start}+{count}"
            );
        }
        assert!(matches!(
            table.read_range(s, n, 1),
            Err(StorageError::InvalidInput(_))
        ));
        assert!(matches!(
            table.read_range(s, 1, u64::MAX),
            Err(StorageError::InvalidInput(_))
        ));
    }
}

#[test]
fn value_agrees_with_read_slice_from_several_threads() {
    let slices = slices_of(&[3000, 1, 0, 12_345, 999, 70_000]);
    let (_dir, path) = round_trip(&slices, &small_blocks());
    let table = Table::open(&path).unwrap();
    let read: Vec<Vec<u16>> = (0..slices.len()).map(|i| table.read_slice(i).unwrap()).collect();
    std::thread::scope(|scope| {
        for t in 0..3 {
            let (table, read) = (&table, &read);
            scope.spawn(move || {
                let mut rng = Rng(100 + t);
                for _ in 0..20_000 {
                    let s = rng.below(read.len() as u64) as usize;
                    if read[s].is_empty() {
                        continue;
                    }
                    let i = rng.below(read[s].len() as u64);
                    assert_eq!(table.value(s, i).unwrap(), read[s][i as usize]);
                }
            });
        }
    });
    for (s, values) in read.iter().enumerate() {
        assert!(matches!(
            table.value(s, values.len() as u64),
            Err(StorageError::InvalidInput(_))
        ));
    }
    assert!(matches!(
        table.value(slices.len(), 0),
        Err(StorageError::InvalidInput(_))
    ));
}

#[test]
fn compression_threads_do_not_change_the_bytes() {
    // Blocks of 1000 values: 17 blocks, spread over several batches of several threads.
    let slices = slices_of(&[5000, 0, 7_000, 4192, 1]);
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for threads in [1, 2, 3, 8] {
        let path = dir.path().join(format!("t{threads}.zmt"));
        let options = WriteOptions {
            threads,
            ..small_blocks()
        };
        write_table_with(&path, &meta("KPvK"), &as_data(&slices), &options).unwrap();
        files.push(fs::read(&path).unwrap());
    }
    assert!(files.iter().all(|f| f == &files[0]));
    let t = Table::open(&dir.path().join("t3.zmt")).unwrap();
    t.verify_checksum().unwrap();
    for (i, (_, v)) in slices.iter().enumerate() {
        assert_eq!(&t.read_slice(i).unwrap(), v);
    }
}

/// Values pushed in pieces of every kind (within a block, across blocks, many whole blocks at
/// once from the middle of a block, which several compressors take straight from the piece
/// while the content hash is made) give the bytes the values pushed whole on one thread give.
#[test]
fn pieces_of_any_size_on_any_threads_give_the_same_bytes() {
    let slices = slices_of(&[40_000, 23_456]);
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole.zmt");
    write_table_with(&whole, &meta("KPvK"), &as_data(&slices), &small_blocks()).unwrap();
    let expected = fs::read(&whole).unwrap();
    let cuts: [&[usize]; 3] = [
        &[1, 1500, 20_000, 18_499],
        &[999, 1, 39_000],
        &[8000, 8000, 24_000],
    ];
    for threads in [2, 3] {
        for (c, cut) in cuts.iter().enumerate() {
            let path = dir.path().join(format!("t{threads}-{c}.zmt"));
            let options = WriteOptions {
                threads,
                ..small_blocks()
            };
            let total = slices.iter().map(|(_, v)| v.len() as u64).sum();
            let mut w = TableWriter::create(&path, &meta("KPvK"), 2, total, &options).unwrap();
            let (k0, v0) = &slices[0];
            w.begin_slice(*k0, v0.len() as u64).unwrap();
            let mut at = 0;
            for &n in cut.iter() {
                w.push_values(&v0[at..at + n]).unwrap();
                at += n;
            }
            assert_eq!(at, v0.len());
            w.end_slice().unwrap();
            let (k1, v1) = &slices[1];
            w.push_slice(*k1, v1).unwrap();
            w.finish().unwrap();
            assert!(
                fs::read(&path).unwrap() == expected,
                "{threads} threads, cut {cut:?}"
            );
        }
    }
}

/// A table written from files of one slice each, laid on the table's grid of blocks (padding
/// values before the slice, a slice of their own), its whole blocks copied as they are
/// (`copy_slice`) and the others pushed as values: the same bytes as written from the values,
/// on 1 and 3 threads; fewer blocks were compressed.
#[test]
fn a_table_written_from_copied_blocks_is_the_table_written_from_values() {
    // Blocks of 1000: slices that start inside a block, span several, fit in one, and end the
    // table on a partial block.
    let slices = slices_of(&[2500, 1000, 300, 4_700, 1000, 2001]);
    let dir = tempfile::tempdir().unwrap();
    for threads in [1, 3] {
        let options = WriteOptions {
            threads,
            ..small_blocks()
        };
        let from_values = dir.path().join(format!("values{threads}.zmt"));
        write_table_with(&from_values, &meta("KPvK"), &as_data(&slices), &options).unwrap();

        let mut parts = Vec::new();
        let mut first = 0usize;
        for (i, (k, values)) in slices.iter().enumerate() {
            let pad = first % 1000;
            let part = dir.path().join(format!("part{threads}-{i}.zmt"));
            let n = 1 + u64::from(pad > 0);
            let mut w = TableWriter::create(
                &part,
                &meta("KPvK"),
                n,
                (pad + values.len()) as u64,
                &small_blocks(),
            )
            .unwrap();
            if pad > 0 {
                w.push_slice([0, 0], &vec![0; pad]).unwrap();
            }
            w.push_slice(*k, values).unwrap();
            w.finish().unwrap();
            parts.push(Table::open_pread(&part).unwrap());
            first += values.len();
        }
        let copied = dir.path().join(format!("copied{threads}.zmt"));
        let mut w = TableWriter::create(
            &copied,
            &meta("KPvK"),
            slices.len() as u64,
            first as u64,
            &options,
        )
        .unwrap();
        let mut blocks_copied = 0;
        for (k, part) in slices.iter().map(|(k, _)| k).zip(&parts) {
            blocks_copied += w.copy_slice(part, part.find_slice(*k).unwrap()).unwrap();
        }
        w.finish().unwrap();
        // The slices lie at 0..2500, 2500..3500, 3500..3800, 3800..8500, 8500..9500 and
        // 9500..11501: the whole blocks inside one are 0..2000 (2), 4000..8000 (4) and
        // 10000..11000 (1).
        assert_eq!(blocks_copied, 7, "{threads} threads");
        assert_eq!(
            fs::read(&copied).unwrap(),
            fs::read(&from_values).unwrap(),
            "{threads} threads"
        );
    }
}

/// Slices copied from files on another grid of blocks (no padding before them) are read and
/// pushed as values: no block copied, the same bytes as written from the values.
#[test]
fn slices_copied_off_the_grid_are_pushed_as_values() {
    let slices = slices_of(&[2500, 1500, 4_700]);
    let dir = tempfile::tempdir().unwrap();
    let from_values = dir.path().join("values.zmt");
    write_table_with(&from_values, &meta("KPvK"), &as_data(&slices), &small_blocks()).unwrap();
    let copied = dir.path().join("copied.zmt");
    let mut w = TableWriter::create(&copied, &meta("KPvK"), 3, 8700, &small_blocks()).unwrap();
    for (i, (k, values)) in slices.iter().enumerate() {
        let part = dir.path().join(format!("part{i}.zmt"));
        write_table_with(
            &part,
            &meta("KPvK"),
            &[SliceData { key: *k, values }],
            &small_blocks(),
        )
        .unwrap();
        let part = Table::open_pread(&part).unwrap();
        // The second slice starts 500 values into a block of the table, at 0 in its file; the
        // others on a block's start in both (the third at 4000: blocks 4000..8000 copied).
        let expected = [2, 0, 4][i];
        assert_eq!(w.copy_slice(&part, 0).unwrap(), expected, "slice {i}");
    }
    w.finish().unwrap();
    assert_eq!(fs::read(&copied).unwrap(), fs::read(&from_values).unwrap());
}

/// A copied block whose frame was damaged in its file is refused (its checksum), and the
/// writer takes nothing more: the table is never finished with it.
#[test]
fn a_damaged_block_is_not_copied() {
    let slices = slices_of(&[3000]);
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("source.zmt");
    write_table_with(&source, &meta("KPvK"), &as_data(&slices), &small_blocks()).unwrap();
    let mut bytes = fs::read(&source).unwrap();
    // The first frame starts at 128: damage a byte of it.
    bytes[140] ^= 0x20;
    fs::write(&source, &bytes).unwrap();
    let source = Table::open_pread(&source).unwrap();
    let target = dir.path().join("target.zmt");
    let mut w = TableWriter::create(&target, &meta("KPvK"), 1, 3000, &small_blocks()).unwrap();
    let err = w.copy_slice(&source, 0).unwrap_err().to_string();
    assert!(err.contains("checksum"), "{err}");
    assert!(w.push_values(&[1]).is_err(), "the writer takes nothing more");
    assert!(w.finish().is_err());
    assert!(!target.exists());
}

#[test]
fn same_input_gives_same_bytes() {
    let slices = slices_of(&[5000, 0, 70_000, 8192]);
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        dir.path().join("a.zmt"),
        dir.path().join("b.zmt"),
        dir.path().join("c.zmt"),
    );
    let sa = write_table(&a, &meta("KPvK"), &as_data(&slices)).unwrap();
    let sb = write_table(&b, &meta("KPvK"), &as_data(&slices)).unwrap();
    // The streaming writer makes the same bytes as the one-shot one.
    let total = slices.iter().map(|s| s.1.len() as u64).sum();
    let writer = |path: &Path| {
        TableWriter::create(
            path,
            &meta("KPvK"),
            slices.len() as u64,
            total,
            &WriteOptions::default(),
        )
        .unwrap()
    };
    let mut w = writer(&c);
    for (k, v) in &slices {
        w.push_slice(*k, v).unwrap();
    }
    let sc = w.finish().unwrap();
    // And so does one fed each slice in pieces of uneven sizes.
    let d = dir.path().join("d.zmt");
    let mut w = writer(&d);
    for (k, v) in &slices {
        w.begin_slice(*k, v.len() as u64).unwrap();
        for piece in v.chunks(777) {
            w.push_values(piece).unwrap();
        }
        w.end_slice().unwrap();
    }
    let sd = w.finish().unwrap();
    assert_eq!(sa, sb);
    assert_eq!(sa, sc);
    assert_eq!(sa, sd);
    let bytes = fs::read(&a).unwrap();
    assert_eq!(bytes, fs::read(&b).unwrap());
    assert_eq!(bytes, fs::read(&c).unwrap());
    assert_eq!(bytes, fs::read(&d).unwrap());
}

/// Pins the canonical bytes: a change of format, of a default or of the zstd build that alters
/// them must be deliberate (tables written before it would no longer be byte-identical).
#[test]
fn canonical_bytes_of_a_small_table_are_pinned() {
    let slices = slices_of(&[100, 0, 70_000]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KPvKP.zmt");
    let summary = write_table(&path, &meta("KPvKP"), &as_data(&slices)).unwrap();
    let hex: String = summary.file_hash.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!((summary.bytes, hex.as_str()), (GOLDEN_LEN, GOLDEN_HASH));
}

const GOLDEN_LEN: u64 = 18708;
/// Format 3 (blocks as two byte planes, zstd level 1). Format 2 (interleaved values, level 3)
/// wrote 15,788 bytes hashing to
/// `eb7b51d0771970ff5f51941ee6ce77928cffbd3858d1ab1369f784747ef78b83` for the same table, and
/// format 1 `9fc49844b18d3bef13375fd89b8afcb3111e8a0a6afb4f634f788224dd32ba23`. (These synthetic
/// values compress worse in format 3; tables' values 20-25% better.)
const GOLDEN_HASH: &str = "1add9ac535991cb00ecc31326887c1fd04aab45c6432223e26eb19f18e8eb0f1";

#[test]
fn a_rewrite_replaces_the_file_and_leaves_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KQvK.zmt");
    let first = slices_of(&[10]);
    let second = slices_of(&[20, 30]);
    write_table(&path, &meta("KQvK"), &as_data(&first)).unwrap();
    let old = Table::open(&path).unwrap();
    write_table(&path, &meta("KQvK"), &as_data(&second)).unwrap();
    assert_eq!(dir_entries(dir.path()), ["KQvK.zmt"]);
    // A table opened before the rename still reads the old file.
    assert_eq!(old.read_slice(0).unwrap(), first[0].1);
    old.verify_checksum().unwrap();
    assert_eq!(Table::open(&path).unwrap().read_slice(1).unwrap(), second[1].1);
    // A finished table is readable by all, not private like the temp file it was.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o644);
    }
}

#[test]
fn a_failed_write_leaves_the_target_untouched_and_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KQvK.zmt");
    let good = slices_of(&[10, 20]);
    let summary = write_table(&path, &meta("KQvK"), &as_data(&good)).unwrap();
    let before = fs::read(&path).unwrap();

    let fresh = dir.path().join("KRvK.zmt");
    let mut unsorted = as_data(&good);
    unsorted.swap(0, 1);
    let mut twice = as_data(&good);
    twice[1].key = twice[0].key;
    for (target, bad) in [(&path, &unsorted), (&fresh, &unsorted), (&path, &twice)] {
        let err = write_table(target, &meta("KQvK"), bad).unwrap_err();
        assert!(matches!(err, StorageError::InvalidInput(_)), "{err}");
    }
    for bad_meta in [meta(""), meta("K/vK"), meta("KQQQQQQQQQQQQQQQQQQQQQQQQQQQQvKR")] {
        let err = write_table(&fresh, &bad_meta, &as_data(&good)).unwrap_err();
        assert!(matches!(err, StorageError::InvalidInput(_)), "{err}");
    }
    let bad_block = WriteOptions {
        block_values: 0,
        ..WriteOptions::default()
    };
    assert!(matches!(
        write_table_with(&fresh, &meta("KRvK"), &as_data(&good), &bad_block),
        Err(StorageError::InvalidInput(_))
    ));

    // A streaming writer dropped half way, or finished short, or pushed too much.
    let mut w = TableWriter::create(&fresh, &meta("KRvK"), 2, 30, &WriteOptions::default()).unwrap();
    w.push_slice(good[0].0, &good[0].1).unwrap();
    assert_eq!(
        dir_entries(dir.path()).len(),
        2,
        "the temp file exists while writing"
    );
    drop(w);
    let mut w = TableWriter::create(&fresh, &meta("KRvK"), 2, 30, &WriteOptions::default()).unwrap();
    w.push_slice(good[0].0, &good[0].1).unwrap();
    assert!(matches!(
        w.push_slice(good[0].0, &good[1].1),
        Err(StorageError::InvalidInput(_))
    ));
    assert!(matches!(
        w.push_slice(good[1].0, &[0; 21]),
        Err(StorageError::InvalidInput(_))
    ));
    assert!(matches!(w.finish(), Err(StorageError::InvalidInput(_))));
    let mut w = TableWriter::create(&fresh, &meta("KRvK"), 1, 10, &WriteOptions::default()).unwrap();
    w.push_slice(good[0].0, &good[0].1).unwrap();
    assert!(matches!(
        w.push_slice(good[1].0, &[]),
        Err(StorageError::InvalidInput(_))
    ));
    drop(w);
    // A slice fed in pieces: values with no slice open, more than declared, a slice ended
    // short, a table finished with a slice open.
    let mut w = TableWriter::create(&fresh, &meta("KRvK"), 2, 30, &WriteOptions::default()).unwrap();
    let invalid = |r: Result<(), StorageError>| matches!(r, Err(StorageError::InvalidInput(_)));
    assert!(invalid(w.push_values(&[1, 2])));
    assert!(invalid(w.end_slice().map(|_| ())));
    w.begin_slice(good[0].0, 10).unwrap();
    assert!(invalid(w.begin_slice(good[1].0, 20)), "two slices open at once");
    assert!(invalid(w.push_values(&[1; 11])));
    w.push_values(&[1; 4]).unwrap();
    assert!(matches!(w.finish(), Err(StorageError::InvalidInput(_))));
    let mut w = TableWriter::create(&fresh, &meta("KRvK"), 2, 30, &WriteOptions::default()).unwrap();
    w.begin_slice(good[0].0, 10).unwrap();
    w.push_values(&[1; 4]).unwrap();
    assert!(invalid(w.end_slice().map(|_| ())), "6 values missing");
    drop(w);

    // A target that cannot be replaced: a directory.
    let blocked = dir.path().join("KNvK.zmt");
    fs::create_dir(&blocked).unwrap();
    fs::write(blocked.join("x"), b"x").unwrap();
    let err = write_table(&blocked, &meta("KNvK"), &as_data(&good)).unwrap_err();
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
    assert!(err.to_string().contains("KNvK.zmt"), "{err}");

    assert_eq!(dir_entries(dir.path()), ["KNvK.zmt", "KQvK.zmt"]);
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(*blake3::hash(&before).as_bytes(), summary.file_hash);
}

#[test]
fn writing_into_a_missing_directory_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope").join("KQvK.zmt");
    let err = write_table(&path, &meta("KQvK"), &[]).unwrap_err();
    assert!(matches!(err, StorageError::Io { .. }), "{err}");
}

/// A small table with several blocks per slice and slices sharing blocks.
fn corruption_subject() -> (Vec<(SliceKey, Vec<u16>)>, Vec<u8>) {
    let slices = slices_of(&[300, 0, 1000, 50, 1, 700]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KBNvK.zmt");
    let options = WriteOptions {
        block_values: 256,
        ..WriteOptions::default()
    };
    write_table_with(&path, &meta("KBNvK"), &as_data(&slices), &options).unwrap();
    (slices, fs::read(&path).unwrap())
}

fn is_bytes_error(e: &StorageError) -> bool {
    e.is_corruption()
        || matches!(
            e,
            StorageError::UnsupportedVersion { .. } | StorageError::UnsupportedMetric { .. }
        )
}

/// Opens damaged bytes and reads everything every way: each answer is an error about the bytes or
/// the original data, and the whole-file check fails. Returns whether `open` already failed.
fn check_damaged(table: Result<Table, StorageError>, slices: &[(SliceKey, Vec<u16>)], what: &str) -> bool {
    let table = match table {
        Err(e) => {
            assert!(is_bytes_error(&e), "{what}: open: unexpected error kind: {e}");
            return true;
        }
        Ok(t) => t,
    };
    let e = table.verify_checksum().expect_err(what);
    assert!(is_bytes_error(&e), "{what}: verify: {e}");
    // The file hash alone (what a build checks before it reuses a table) fails too.
    let e = table.verify_file_hash().expect_err(what);
    assert!(is_bytes_error(&e), "{what}: file hash: {e}");
    for (s, (k, values)) in slices.iter().enumerate() {
        assert_eq!(table.slices()[s].key, *k, "{what}");
        match table.read_slice(s) {
            Ok(read) => assert_eq!(&read, values, "{what}: slice {s} read wrong data"),
            Err(e) => assert!(is_bytes_error(&e), "{what}: read_slice: {e}"),
        }
        let mut streamed = Vec::new();
        match table.stream_slice(s, |v| streamed.extend_from_slice(v)) {
            Ok(()) => assert_eq!(&streamed, values, "{what}: slice {s} streamed wrong data"),
            Err(e) => assert!(is_bytes_error(&e), "{what}: stream_slice: {e}"),
        }
        for i in (0..values.len()).step_by(37) {
            match table.value(s, i as u64) {
                Ok(v) => assert_eq!(v, values[i], "{what}: value {s}/{i} wrong"),
                Err(e) => assert!(is_bytes_error(&e), "{what}: value: {e}"),
            }
        }
    }
    false
}

#[test]
fn every_flipped_byte_is_detected() {
    let (slices, bytes) = corruption_subject();
    assert!(
        bytes.len() < 20_000,
        "keep the subject small: {} bytes",
        bytes.len()
    );
    let mut open_failures = 0;
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[at] ^= mask;
            let what = format!("byte {at} ^ {mask:#x}");
            open_failures += usize::from(check_damaged(Table::from_bytes(damaged), &slices, &what));
        }
    }
    // The header, tables and footer are checked by `open`; the blocks are not.
    assert!(
        open_failures > 0 && open_failures < 3 * bytes.len(),
        "{open_failures}"
    );
}

#[test]
fn flipped_bytes_in_a_file_on_disk_are_detected() {
    let (slices, bytes) = corruption_subject();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KBNvK.zmt");
    for at in (0..bytes.len())
        .step_by(97)
        .chain([0, 8, 12, 130, bytes.len() - 60, bytes.len() - 1])
    {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x10;
        fs::write(&path, &damaged).unwrap();
        check_damaged(Table::open(&path), &slices, &format!("mmap byte {at}"));
        check_damaged(Table::open_pread(&path), &slices, &format!("pread byte {at}"));
    }
}

#[test]
fn every_truncation_and_extension_is_refused() {
    let (_, bytes) = corruption_subject();
    for len in 0..bytes.len() {
        let err = Table::from_bytes(bytes[..len].to_vec()).unwrap_err();
        assert!(err.is_corruption(), "length {len}: {err}");
    }
    for extra in [&b"\0"[..], b"ZRMLEND\n", &bytes[bytes.len() - 40..]] {
        let mut longer = bytes.clone();
        longer.extend_from_slice(extra);
        let err = Table::from_bytes(longer).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KBNvK.zmt");
    for len in [0, 5, 8, 127, 128, 1000, bytes.len() - 41, bytes.len() - 1] {
        fs::write(&path, &bytes[..len]).unwrap();
        let err = Table::open(&path).unwrap_err();
        assert!(err.is_corruption(), "length {len}: {err}");
        assert!(err.to_string().contains("KBNvK.zmt"), "{err}");
    }
}

#[test]
fn errors_name_the_file_and_the_fault() {
    let (slices, bytes) = corruption_subject();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KBNvK.zmt");

    // Block 3 holds values 768..1024 of the stream: slice 2 (values 300..1300) from index 468.
    let (at, len) = block_ranges(&bytes)[3];
    let mut damaged = bytes.clone();
    damaged[at + len / 2] ^= 1;
    fs::write(&path, &damaged).unwrap();
    let t = Table::open(&path).unwrap();
    // Block 2 is intact: the value just before block 3 reads fine.
    assert_eq!(t.value(2, 467).unwrap(), slices[2].1[467]);
    let msg = t.value(2, 468).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!("table {} is corrupt: block 3 checksum mismatch", path.display())
    );
    let msg = t.read_slice(2).unwrap_err().to_string();
    assert!(msg.contains("block 3 checksum mismatch"), "{msg}");
    let msg = t.verify_checksum().unwrap_err().to_string();
    assert!(msg.contains("file checksum mismatch"), "{msg}");

    fs::write(
        &path,
        b"just some text that is not a table, but longer than a header would be ......",
    )
    .unwrap();
    let err = Table::open(&path).unwrap_err();
    assert!(matches!(err, StorageError::NotATable { .. }));
    assert_eq!(
        err.to_string(),
        format!("{} is not a zermelo table (bad magic)", path.display())
    );

    let mut newer = bytes.clone();
    newer[8] = 4;
    fs::write(&path, &newer).unwrap();
    let err = Table::open(&path).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::UnsupportedVersion {
                found: 4,
                supported: FORMAT_VERSION,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("format version 4, this build reads versions 1 to 3"),
        "{err}"
    );

    let err = Table::open(&dir.path().join("missing.zmt")).unwrap_err();
    assert!(matches!(err, StorageError::Io { .. }));
    assert!(err.to_string().contains("missing.zmt"), "{err}");
}

/// `(offset, length)` of every block, read from the block table as `FORMAT.md` describes it.
fn block_ranges(f: &[u8]) -> Vec<(usize, usize)> {
    let u64_at = |at: usize| u64::from_le_bytes(f[at..at + 8].try_into().unwrap()) as usize;
    let (slice_count, block_count) = (u64_at(56), u64_at(72));
    let block_table = f.len() - 40 - 32 - block_count * 16;
    assert!(block_table > 128 + slice_count * 64);
    (0..block_count)
        .map(|b| {
            let at = block_table + b * 16;
            (
                u64_at(at),
                u32::from_le_bytes(f[at + 8..at + 12].try_into().unwrap()) as usize,
            )
        })
        .collect()
}

/// A reader written from `FORMAT.md` alone, sharing no code with the crate.
#[test]
fn format_md_describes_the_bytes() {
    let slices = slices_of(&[300, 0, 1000, 50]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KPvK.zmt");
    let options = WriteOptions {
        block_values: 256,
        ..WriteOptions::default()
    };
    write_table_with(&path, &meta("KPvK"), &as_data(&slices), &options).unwrap();
    let f = fs::read(&path).unwrap();

    let u32_at = |at: usize| u32::from_le_bytes(f[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(f[at..at + 8].try_into().unwrap());
    assert_eq!(&f[0..8], b"ZRMLTB\r\n");
    assert_eq!([u32_at(8), u32_at(12), u32_at(16), u32_at(20)], [3, 1, 1, 256]);
    assert_eq!(&f[24..29], b"\x04KPvK");
    let (slice_count, value_count, block_count) = (u64_at(56), u64_at(64), u64_at(72));
    assert_eq!((slice_count, value_count, block_count), (4, 1350, 6));
    assert_eq!(u32_at(124), crc32fast::hash(&f[..124]));

    let n = f.len();
    assert_eq!(&f[n - 8..], b"ZRMLEND\n");
    assert_eq!(&f[n - 40..n - 8], blake3::hash(&f[..n - 40]).as_bytes());
    let tables_len = (slice_count * 64 + block_count * 16) as usize;
    let tables_at = n - 40 - 32 - tables_len;
    assert_eq!(&f[n - 72..n - 40], blake3::hash(&f[tables_at..n - 72]).as_bytes());

    let mut stream = Vec::new();
    let mut offset = 128;
    for b in 0..block_count as usize {
        let at = tables_at + slice_count as usize * 64 + b * 16;
        let (block_at, len, crc) = (u64_at(at) as usize, u32_at(at + 8) as usize, u32_at(at + 12));
        assert_eq!(block_at, offset);
        assert_eq!(crc32fast::hash(&f[block_at..block_at + len]), crc);
        // Two planes: the low bytes of the block's values, then their high bytes.
        let raw = zstd::decode_all(&f[block_at..block_at + len]).unwrap();
        let (low, high) = raw.split_at(raw.len() / 2);
        stream.extend(low.iter().zip(high).map(|(&l, &h)| u16::from_le_bytes([l, h])));
        offset += len;
    }
    assert_eq!(offset, tables_at);
    for (s, (k, values)) in slices.iter().enumerate() {
        let at = tables_at + s * 64;
        let (first, count) = (u64_at(at + 16) as usize, u64_at(at + 24) as usize);
        assert_eq!([u64_at(at), u64_at(at + 8)], *k);
        assert_eq!(&stream[first..first + count], &values[..]);
        let mut h = blake3::Hasher::new();
        h.update(b"zermelo slice v2");
        h.update(&1u32.to_le_bytes()); // the index layout
        h.update(&4u64.to_le_bytes());
        h.update(b"KPvK");
        h.update(&k[0].to_le_bytes());
        h.update(&k[1].to_le_bytes());
        h.update(&(count as u64).to_le_bytes());
        for v in values {
            h.update(&v.to_le_bytes());
        }
        assert_eq!(&f[at + 32..at + 64], h.finalize().as_bytes());
    }
}

/// The bytes of table file `f` (this build's format) rewritten as format `version` (1 or 2),
/// from `FORMAT.md`: blocks of interleaved little-endian values (each decompressed, its two
/// planes interleaved and compressed again), and with `v1_hashes` the slice hashes of format 1
/// in place of the current ones.
fn as_older_format(f: &[u8], version: u32, v1_hashes: Option<&[(SliceKey, Vec<u16>)]>) -> Vec<u8> {
    let n = f.len();
    let u32_at = |at: usize| u32::from_le_bytes(f[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(f[at..at + 8].try_into().unwrap());
    let (slice_count, block_count) = (u64_at(56) as usize, u64_at(72) as usize);
    let tables_at = n - 40 - 32 - (slice_count * 64 + block_count * 16);
    let mut out = f[..128].to_vec();
    out[8..12].copy_from_slice(&version.to_le_bytes());
    let crc = crc32fast::hash(&out[..124]);
    out[124..128].copy_from_slice(&crc.to_le_bytes());
    let mut block_table = Vec::new();
    for b in 0..block_count {
        let at = tables_at + slice_count * 64 + b * 16;
        let (block_at, len) = (u64_at(at) as usize, u32_at(at + 8) as usize);
        let planes = zstd::decode_all(&f[block_at..block_at + len]).unwrap();
        let (low, high) = planes.split_at(planes.len() / 2);
        let interleaved: Vec<u8> = low.iter().zip(high).flat_map(|(&l, &h)| [l, h]).collect();
        let frame = zstd::encode_all(&interleaved[..], 3).unwrap();
        block_table.extend_from_slice(&(out.len() as u64).to_le_bytes());
        block_table.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        block_table.extend_from_slice(&crc32fast::hash(&frame).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    let mut slice_table = f[tables_at..tables_at + slice_count * 64].to_vec();
    for (s, (k, values)) in v1_hashes.into_iter().flatten().enumerate() {
        let mut h = blake3::Hasher::new();
        h.update(b"zermelo slice v1");
        h.update(&4u64.to_le_bytes());
        h.update(b"KPvK");
        h.update(&k[0].to_le_bytes());
        h.update(&k[1].to_le_bytes());
        h.update(&(values.len() as u64).to_le_bytes());
        for v in values {
            h.update(&v.to_le_bytes());
        }
        slice_table[s * 64 + 32..s * 64 + 64].copy_from_slice(h.finalize().as_bytes());
    }
    let tables_from = out.len();
    out.extend_from_slice(&slice_table);
    out.extend_from_slice(&block_table);
    let tables_hash = blake3::hash(&out[tables_from..]);
    out.extend_from_slice(tables_hash.as_bytes());
    let file_hash = blake3::hash(&out);
    out.extend_from_slice(file_hash.as_bytes());
    out.extend_from_slice(b"ZRMLEND\n");
    out
}

/// Tables of formats 1 and 2 (blocks of interleaved values; for format 1, slice hashes without
/// the index layout), made here by rewriting a file of this build's format from `FORMAT.md`,
/// are still read and checked: every slice, with its format's hash. A format-1 file whose
/// hashes are format 2's is corrupt, and so is a format-3 header on interleaved blocks.
#[test]
fn format_1_and_2_tables_are_still_read() {
    let slices = slices_of(&[300, 0, 1000, 50]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("KPvK.zmt");
    write_table(&path, &meta("KPvK"), &as_data(&slices)).unwrap();
    let current = fs::read(&path).unwrap();
    assert_eq!(Table::from_bytes(current.clone()).unwrap().format_version(), 3);
    for (version, v1_hashes) in [(1, Some(&slices[..])), (2, None)] {
        let table = Table::from_bytes(as_older_format(&current, version, v1_hashes)).unwrap();
        assert_eq!(table.format_version(), version);
        table.verify_checksum().unwrap();
        for (i, (_, values)) in slices.iter().enumerate() {
            assert_eq!(&table.read_slice(i).unwrap()[..], &values[..], "format {version}");
        }
    }
    let table = Table::from_bytes(as_older_format(&current, 1, None)).unwrap();
    assert!(table.verify_checksum().is_err());
    assert!(table.read_slice(0).is_err());
    // Interleaved blocks read as planes: the values are wrong, and so their hashes.
    let table = Table::from_bytes(as_older_format(&current, 3, None)).unwrap();
    assert!(table.verify_checksum().is_err());
    assert!(table.read_slice(0).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(t) = Table::from_bytes(bytes) {
            let _ = t.verify_checksum();
        }
    }

    #[test]
    fn random_bytes_behind_a_good_magic_never_panic(
        version in prop_oneof![Just(1u32), any::<u32>()],
        rest in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut bytes = b"ZRMLTB\r\n".to_vec();
        bytes.extend_from_slice(&version.to_le_bytes());
        bytes.extend_from_slice(&rest);
        if let Ok(t) = Table::from_bytes(bytes) {
            let _ = t.verify_checksum();
        }
    }

    #[test]
    fn damaged_tables_never_give_wrong_data(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in prop_oneof![Just(None), any::<prop::sample::Index>().prop_map(Some)],
    ) {
        let (slices, bytes) = SUBJECT.with(|s| s.clone());
        let mut damaged = bytes.clone();
        for (at, byte) in &edits {
            damaged[at.index(bytes.len())] = *byte;
        }
        if let Some(cut) = cut {
            damaged.truncate(cut.index(bytes.len()));
        }
        if damaged != bytes {
            check_damaged(Table::from_bytes(damaged), &slices, "proptest");
        }
    }
}

thread_local! {
    static SUBJECT: (Vec<(SliceKey, Vec<u16>)>, Vec<u8>) = corruption_subject();
}
