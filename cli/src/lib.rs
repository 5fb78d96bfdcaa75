//! The `zermelo` command's library: the single-node build ([`build`]), probing ([`probe`]),
//! table statistics ([`stats`]), the independent verifier ([`verify`]), the cluster commands
//! ([`cluster`]) and Church's co-ordinate squares ([`squares`]).
//!
//! Without the feature `cluster` (on by default) it is the single-node build, probing and
//! statistics alone, and links no gRPC and no HTTP server: what the Python module uses.

#[cfg(feature = "cluster")]
pub mod analyse;
#[cfg(feature = "cluster")]
pub mod bench;
pub mod build;
#[cfg(feature = "cluster")]
pub mod child;
#[cfg(feature = "cluster")]
pub mod cluster;
pub mod dtz;
mod failure;
pub mod lichess;
pub mod materials;
pub mod memory;
pub mod pack;
pub mod partial;
pub mod probe;
pub mod progress;
#[cfg(feature = "cluster")]
pub mod serve;
#[cfg(feature = "cluster")]
pub mod squares;
pub mod stats;
pub mod stop;
#[cfg(feature = "cluster")]
pub use zermelo_verify as verify;

pub use failure::Failure;

/// The most men this build solves.
pub const MAX_MEN: u32 = 7;
