//! Compression ratio and write/read throughput of table files on synthetic DTM-like values.
//!
//! `cargo run --release -p zermelo-storage --example measure -- [million values] [zstd levels]`,
//! for instance `-- 50 3,6,9`. Writes into a temp folder and removes it.

use std::time::Instant;

use zermelo_storage::{write_table_with, Metric, SliceData, Table, TableMeta, WriteOptions};

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

fn distance(a: u64, b: u64) -> u64 {
    (a % 8).abs_diff(b % 8).max((a / 8).abs_diff(b / 8))
}

fn edge(sq: u64) -> u64 {
    let (f, r) = (sq % 8, sq / 8);
    f.min(7 - f).min(r).min(7 - r)
}

/// A KRvK-like table with a fourth man, indexed naively (64 squares per man, side to move on
/// top): broken positions (men on one square, kings adjacent) are 0xffff, some positions where
/// the rook hangs are draws (0), the rest win or lose in a number of plies that grows with the
/// defending king's distance from the edge and from the other king. A few dozen distinct values,
/// with the geometric runs and repeats of a real index.
fn krk_like(i: u64) -> u16 {
    let x = i % 64;
    let wr = (i / 64) % 64;
    let bk = (i / 4096) % 64;
    let wk = (i / 262_144) % 64;
    let stm = (i / 16_777_216) % 2;
    let sq = [wk, bk, wr, x];
    for a in 0..4 {
        for b in a + 1..4 {
            if sq[a] == sq[b] {
                return 0xffff;
            }
        }
    }
    if distance(wk, bk) <= 1 {
        return 0xffff;
    }
    if (distance(wr, bk) <= 1 && distance(wr, wk) > 1 && stm == 1)
        || (distance(x, bk) <= 1 && mix(i / 64).is_multiple_of(4))
    {
        return 0;
    }
    let d = 3 * (3 - edge(bk)) + distance(wk, bk) + mix(i / 8) % 3;
    if stm == 0 {
        (2 * d + 1) as u16
    } else {
        (2 * d + 2) as u16 | 0x8000
    }
}

/// Runs of random length (mean 6.7) of draws, broken positions and small depths.
fn runs(n: usize, seed: u64) -> Vec<u16> {
    let mut v = Vec::with_capacity(n);
    let mut cur = 0u16;
    let mut s = seed;
    for i in 0..n {
        s = mix(s + i as u64);
        if s % 100 < 15 {
            let r = mix(s) % 100;
            cur = match r {
                0..=39 => 0,
                40..=49 => 0xffff,
                _ => 1 + (mix(s ^ 7) % 60) as u16,
            };
        }
        v.push(cur);
    }
    v
}

fn main() {
    let mut args = std::env::args().skip(1);
    let millions: usize = args.next().map_or(50, |a| a.parse().expect("million values"));
    let levels: Vec<i32> = args
        .next()
        .unwrap_or_else(|| "3,6,9".to_owned())
        .split(',')
        .map(|l| l.parse().expect("zstd level"))
        .collect();
    let n = millions * 1_000_000;
    let dir = tempfile::tempdir().expect("temp dir");
    let meta = TableMeta {
        material: "KRNvK".to_owned(),
        metric: Metric::Dtm,
        index_layout: 1,
    };

    let pawnless: Vec<u16> = (0..n as u64).map(krk_like).collect();
    let run_values = runs(n, 1);
    // Pawn-ending shaped: many slices of 262,144 values (64^3, four men without pawns' squares).
    let run_slices: Vec<SliceData<'_>> = run_values
        .chunks(262_144)
        .enumerate()
        .map(|(i, values)| SliceData {
            key: [i as u64 + 1, 0],
            values,
        })
        .collect();
    let inputs: [(&str, Vec<SliceData<'_>>); 2] = [
        (
            "krk-like, 1 slice",
            vec![SliceData {
                key: [0, 0],
                values: &pawnless,
            }],
        ),
        ("runs, 262144-value slices", run_slices),
    ];

    for (name, slices) in &inputs {
        println!("{name}: {n} values, {} slices", slices.len());
        for &level in &levels {
            let path = dir.path().join("KRNvK.zmt");
            let options = WriteOptions {
                zstd_level: level,
                ..WriteOptions::default()
            };
            let start = Instant::now();
            let summary = write_table_with(&path, &meta, slices, &options).expect("write");
            let write_s = start.elapsed().as_secs_f64();

            let table = Table::open(&path).expect("open");
            let start = Instant::now();
            let mut read = 0usize;
            for i in 0..table.slices().len() {
                read += table.read_slice(i).expect("read").len();
            }
            let read_s = start.elapsed().as_secs_f64();
            assert_eq!(read, n);
            let start = Instant::now();
            table.verify_checksum().expect("verify");
            let verify_s = start.elapsed().as_secs_f64();
            let start = Instant::now();
            let probes = 200_000u64;
            let mut x = 1u64;
            for _ in 0..probes {
                x = mix(x);
                let s = (x % table.slices().len() as u64) as usize;
                let count = table.slices()[s].count;
                std::hint::black_box(table.value(s, mix(x) % count).expect("value"));
            }
            let probe_us = start.elapsed().as_secs_f64() / probes as f64 * 1e6;
            println!(
                "  level {level}: {:>11} bytes, ratio {:5.2}x, write {:6.1} M values/s, read_slice {:6.1} M \
                 values/s, verify {:6.1} M values/s, random value() {probe_us:.1} us",
                summary.bytes,
                (n * 2) as f64 / summary.bytes as f64,
                n as f64 / write_s / 1e6,
                n as f64 / read_s / 1e6,
                n as f64 / verify_s / 1e6,
            );
        }
    }
}
