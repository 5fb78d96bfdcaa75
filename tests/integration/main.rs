//! Zermelo's integration tests: the `zermelo` binary run as a user runs it, on tables it built.
//!
//! One test binary (see `cli/Cargo.toml`); each module is one area. Tables are built once into a
//! directory under the target folder shared by the tests (a build skips complete tables, and
//! table files are replaced atomically, so tests running at the same time do not disturb each
//! other).

mod common;

mod analyse;
mod cli_errors;
mod cluster;
mod corruption;
mod determinism;
mod dtz;
mod kpk;
mod materials;
mod memory;
mod pack;
mod probe_json;
mod resume;
mod serve;
mod six_men;
mod squares;
mod terminal;
