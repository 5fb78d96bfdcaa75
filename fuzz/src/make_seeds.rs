//! Writes the seed corpora of the binary targets (`table`, `journal`, `wire`, `task`) into
//! `fuzz/corpus/`: small inputs made with the project's own writers, so that the fuzzers start
//! from valid files. Run once from `fuzz/`: `cargo run --release --bin make_seeds`; the text
//! targets' seeds (`fen`, `lichess_fen`, `serve`) are written by hand.

use std::fs;
use std::path::{Path, PathBuf};

use prost::Message;
use zermelo_chess::{Material, SliceKey};
use zermelo_coordinator::{Journal, Record};
use zermelo_coordinator::schedule::{JobId, SliceResult};
use zermelo_proto::keys::to_wire;
use zermelo_proto::wire::{encode_values, SliceFile};
use zermelo_proto::{slice_chunks, SliceHeader};
use zermelo_storage::{write_table_with, Metric, SliceData, TableMeta, WriteOptions};

fn put(dir: &Path, name: &str, bytes: &[u8]) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(name), bytes).unwrap();
}

fn with(prefix: &[u8], bytes: &[u8]) -> Vec<u8> {
    [prefix, bytes].concat()
}

fn tables(out: &Path, tmp: &Path) {
    let values: Vec<u16> = (0..40u16).map(|i| (i * 7) % 13 + (i % 3) * 256).collect();
    let cases: [(&str, Metric, u32, Vec<(u64, u64, usize)>); 4] = [
        (
            "KPvK",
            Metric::Dtm,
            16,
            vec![(1 << 12, 0, 20), (1 << 13, 0, 0), (1 << 14, 0, 40)],
        ),
        ("KQvK", Metric::Dtm, 8, vec![(0, 0, 40)]),
        (
            "KPvKP",
            Metric::Dtz50,
            5,
            vec![(1 << 12, 1 << 52, 3), (1 << 12, 1 << 53, 11)],
        ),
        ("KRvK", Metric::AdjudicatedDtm, 1 << 20, vec![(0, 0, 9)]),
    ];
    for (material, metric, block_values, slices) in cases {
        let meta = TableMeta {
            material: material.to_owned(),
            metric,
            index_layout: zermelo_chess::index::INDEX_LAYOUT,
        };
        let data: Vec<SliceData<'_>> = slices
            .iter()
            .map(|&(w, b, n)| SliceData {
                key: [w, b],
                values: &values[..n],
            })
            .collect();
        let path = tmp.join(format!("{material}.zmt"));
        let options = WriteOptions {
            block_values,
            durable: false,
            ..WriteOptions::default()
        };
        write_table_with(&path, &meta, &data, &options).unwrap();
        let bytes = fs::read(&path).unwrap();
        // Bit 0 and 1: the target repairs the checksums (and content hashes) of what it mutates.
        put(out, &format!("{material}-repair"), &with(&[3], &bytes));
        put(out, &format!("{material}-as-is"), &with(&[0], &bytes));
    }
}

fn journals(out: &Path, tmp: &Path) {
    let kpk = SliceKey::all_of("KPvK".parse().unwrap());
    let records = vec![
        Record::JobSubmitted {
            job: JobId(1),
            materials: vec!["KQvK".parse().unwrap(), "KPvK".parse().unwrap()],
        },
        Record::SliceFinished(SliceResult {
            key: SliceKey::pawnless("KQvK".parse().unwrap()),
            hash: [1; 32],
            positions: 59_136,
        }),
        Record::SliceFinished(SliceResult {
            key: kpk[3],
            hash: [2; 32],
            positions: 3_612,
        }),
        Record::AnalysisSubmitted {
            job: JobId(2),
            roots: kpk[..2].to_vec(),
        },
    ];
    for (name, batches) in [
        ("one-batch", vec![records.clone()]),
        ("batches", records.iter().map(|r| vec![r.clone()]).collect()),
        ("empty", vec![]),
    ] {
        let path = tmp.join(name);
        let (mut journal, _) = Journal::open(&path).unwrap();
        for batch in batches {
            journal.append(&batch).unwrap();
        }
        drop(journal);
        let bytes = fs::read(&path).unwrap();
        put(out, name, &bytes);
        if name == "batches" {
            put(out, "torn", &bytes[..bytes.len() - 5]);
        }
    }
}

fn wire(out: &Path) {
    let keys: Vec<SliceKey> = ["KPvK", "KPvKP", "KQvK", "KRPvKR"]
        .iter()
        .flat_map(|m| {
            let all = SliceKey::all_of(m.parse::<Material>().unwrap());
            [all[0], all[all.len() / 2], all[all.len() - 1]]
        })
        .collect();
    for (i, key) in keys.iter().enumerate() {
        let w = to_wire(key);
        put(out, &format!("key-message-{i}"), &with(&[0], &w.encode_to_vec()));
        let mut fields = vec![1u8];
        fields.extend_from_slice(w.material.as_bytes());
        fields.push(b'|');
        fields.extend_from_slice(&w.white_pawns.to_le_bytes());
        fields.extend_from_slice(&w.black_pawns.to_le_bytes());
        put(out, &format!("key-fields-{i}"), &fields);
    }
    let values: Vec<u16> = (0..300u16).map(|i| if i < 150 { 1 } else { i % 17 }).collect();
    let encoded = encode_values(&values);
    for (name, n, piece) in [
        ("values", 300u64, 7u16),
        ("values-whole", 300, 4096),
        ("values-none", 0, 1),
    ] {
        let data = if n == 0 {
            encode_values(&[])
        } else {
            encoded.clone()
        };
        let mut input = vec![2u8];
        input.extend_from_slice(&n.to_le_bytes());
        input.extend_from_slice(&piece.to_le_bytes());
        input.extend_from_slice(&data);
        put(out, name, &input);
    }
    let file = SliceFile {
        hash: [9; 32],
        positions: 300,
        data: encoded.clone(),
    };
    put(out, "slice-file", &with(&[3], &file.to_bytes()));
    let mut stream = vec![4u8];
    stream.extend_from_slice(&4096u32.to_le_bytes());
    for (key, data) in keys.iter().take(2).zip([&encoded[..], b"abc"]) {
        let header = SliceHeader {
            key: Some(to_wire(key)),
            total_length: data.len() as u64,
            content_hash: vec![7; 32],
            positions: 300,
        };
        for chunk in slice_chunks(header, data, 16) {
            stream.extend_from_slice(&chunk.encode_length_delimited_to_vec());
        }
    }
    put(out, "chunks", &stream);
}

fn tasks(out: &Path) {
    use zermelo_proto::task::{Part, SliceRef, Task, Work};
    let key = |m: &str| SliceKey::all_of(m.parse::<Material>().unwrap())[0];
    let successors = vec![
        SliceRef {
            key: key("KQvK"),
            hash: [1; 32],
        },
        SliceRef {
            key: key("KPvK"),
            hash: [2; 32],
        },
    ];
    let kpvk = SliceKey::all_of("KPvK".parse::<Material>().unwrap());
    for (name, work) in [
        ("solve", Work::Solve(kpvk[..3].to_vec())),
        (
            "verify",
            Work::Verify(vec![SliceRef {
                key: kpvk[4],
                hash: [3; 32],
            }]),
        ),
        (
            "part",
            Work::Part(Part {
                key: key("KRvKN"),
                group: 5,
                parts: 3,
                index: 1,
            }),
        ),
    ] {
        let task = Task {
            lease_id: 9,
            lease_ttl_ms: 30_000,
            deadline_unix_ms: 1_800_000_000_000,
            job_id: 2,
            work,
            successors: successors.clone(),
        };
        put(
            out,
            &format!("task-{name}"),
            &with(&[0], &task.to_wire().encode_to_vec()),
        );
    }
    let complete = zermelo_proto::CompleteTaskRequest {
        worker_id: 1,
        lease_id: 9,
        slices: successors
            .iter()
            .map(|r| zermelo_proto::SolvedSlice {
                slice: Some(r.to_wire()),
                positions: 8192,
            })
            .collect(),
        verdict: None,
    };
    put(out, "complete", &with(&[1], &complete.encode_to_vec()));
}

fn main() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let tmp = tempfile::tempdir().unwrap();
    tables(&corpus.join("table"), tmp.path());
    journals(&corpus.join("journal"), tmp.path());
    wire(&corpus.join("wire"));
    tasks(&corpus.join("task"));
}
