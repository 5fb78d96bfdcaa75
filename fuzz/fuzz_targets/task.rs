//! The typed task of the wire (`zermelo_proto::task`): a leased `Task` as the worker reads it
//! (`Task::from_wire`) and a `CompleteTaskRequest`'s slice references as the coordinator reads
//! them (`SliceRef::from_wire`), each behind prost's decoding of the message.
//!
//! The first byte chooses: even, a `Task` message; odd, a `CompleteTaskRequest` message.
//!
//! Asserts: no input panics; a task `from_wire` takes has canonical keys, at least one slice,
//! none named twice among its slices or among its successors, a part of one slice with its
//! index below its count of at least 2, and goes to the wire and back to itself; a slice
//! reference taken has a canonical key and goes back to the same wire message.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use prost::Message;
use zermelo_proto::task::{SliceRef, Task, Work};

fn check_task(wire: &zermelo_proto::Task) {
    let Ok(task) = Task::from_wire(wire) else {
        return;
    };
    let slices = task.slices();
    assert!(!slices.is_empty(), "a task with no slice: {wire:?}");
    let once = |keys: &[zermelo_chess::SliceKey]| keys.iter().collect::<BTreeSet<_>>().len() == keys.len();
    assert!(once(&slices), "a slice named twice: {wire:?}");
    let successors: Vec<_> = task.successors.iter().map(|r| r.key).collect();
    assert!(once(&successors), "a successor named twice: {wire:?}");
    for key in slices.iter().chain(&successors) {
        assert!(key.is_canonical(), "{key} is not canonical");
    }
    if let Work::Part(p) = &task.work {
        assert!(
            p.parts >= 2 && p.index < p.parts,
            "part {} of {}",
            p.index,
            p.parts
        );
    }
    assert_eq!(
        Task::from_wire(&task.to_wire()).as_ref(),
        Ok(&task),
        "the task does not round-trip"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    if which % 2 == 0 {
        if let Ok(task) = zermelo_proto::Task::decode(rest) {
            check_task(&task);
        }
        return;
    }
    let Ok(request) = zermelo_proto::CompleteTaskRequest::decode(rest) else {
        return;
    };
    for solved in &request.slices {
        let Some(wire) = &solved.slice else { continue };
        if let Ok(r) = SliceRef::from_wire(wire) {
            assert!(r.key.is_canonical(), "{} is not canonical", r.key);
            assert_eq!(&r.to_wire(), wire, "the reference does not round-trip");
        }
    }
});
