//! The coordinator's journal (coordinator/src/journal.rs), read back as after a crash:
//! `Journal::open` on a file holding any bytes.
//!
//! Asserts: no input panics; a journal that opens opens again with the same records and no torn
//! tail (the first open cut it off); a record appended to it is replayed after the others.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use zermelo_chess::SliceKey;
use zermelo_coordinator::{Journal, Record};
use zermelo_coordinator::schedule::{JobId, SliceResult};

/// A file in a folder of its own.
fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        // scripts/fuzz.sh names a folder (on tmpfs when there is one) that it removes after.
        let dir = match std::env::var_os("ZERMELO_FUZZ_TMP") {
            Some(base) => tempfile::tempdir_in(base),
            None => tempfile::tempdir(),
        };
        dir.expect("a temporary folder").keep().join("journal")
    })
}

fuzz_target!(|data: &[u8]| {
    let path = path();
    std::fs::write(path, data).expect("writing the journal");
    let Ok((journal, replay)) = Journal::open(path) else {
        return;
    };
    let len = journal.len();
    drop(journal);
    assert_eq!(std::fs::metadata(path).unwrap().len(), len);
    let (mut journal, again) = Journal::open(path).expect("a journal that opened opens again");
    assert_eq!(
        again.records, replay.records,
        "a second open replays other records"
    );
    assert_eq!(again.torn_bytes, 0, "the first open left a torn tail");
    let record = Record::SliceFinished(SliceResult {
        key: SliceKey::pawnless("KQvK".parse().unwrap()),
        hash: [7; 32],
        positions: 59_136,
    });
    let job = Record::JobSubmitted {
        job: JobId(u64::MAX),
        materials: vec!["KRPvKR".parse().unwrap()],
    };
    journal.append(&[record.clone(), job.clone()]).expect("appending");
    drop(journal);
    let (_, after) = Journal::open(path).expect("a journal appended to opens again");
    let mut expected = replay.records;
    expected.extend([record, job]);
    assert_eq!(after.records, expected);
    assert_eq!(after.torn_bytes, 0);
});
