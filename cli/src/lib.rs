//! The `zermelo` command's library: the single-node build ([`build`]), probing ([`probe`]),
//! table statistics ([`stats`]), the independent verifier ([`verify`]), the cluster commands
//! ([`cluster`]) and Church's co-ordinate squares ([`squares`]).

pub mod analyse;
pub mod bench;
pub mod build;
pub mod cluster;
pub mod dtz;
pub mod lichess;
pub mod materials;
pub mod memory;
pub mod partial;
pub mod probe;
pub mod progress;
pub mod serve;
pub mod squares;
pub mod stats;
pub mod stop;
pub use zermelo_verify as verify;

/// The most men this build solves.
pub const MAX_MEN: u32 = 7;
