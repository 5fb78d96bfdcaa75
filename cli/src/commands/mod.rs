//! One module per command: its arguments (`Args`) and its `run`.

pub(crate) mod analyse;
pub(crate) mod bench;
pub(crate) mod cluster;
pub(crate) mod completions;
pub(crate) mod coordinator;
pub(crate) mod dtz;
pub(crate) mod man;
pub(crate) mod materials;
pub(crate) mod pack;
pub(crate) mod probe;
pub(crate) mod serve;
pub(crate) mod solve;
pub(crate) mod squares;
pub(crate) mod stats;
pub(crate) mod status;
pub(crate) mod submit;
pub(crate) mod verify;
pub(crate) mod worker;
