//! The worker side of Zermelo: solving one slice against the finished values of its successors.
//!
//! [`solve::solve_slice`] is the slice solver of DESIGN §2; [`tables`] reads finished tables
//! from a directory for the solver (whole slices) and for probing (one block at a time); [`cache`]
//! is a cluster worker's slice cache (memory-mapped, hash-checked, evicted under a budget);
//! [`client`] is the cluster worker, a gRPC client of the coordinator; [`coord`] solves Church's
//! game of co-ordinate squares (COORD), where the pawns never move; [`adjudicate`] holds the
//! declared rules `zermelo analyse --adjudicate` may use; [`waves`] solves waves of slices.

pub mod adjudicate;
pub mod cache;
pub mod client;
pub mod coord;
pub mod par;
pub mod reference;
pub mod solve;
pub mod tables;
pub mod waves;

pub use solve::{solve_slice, SolveError, Successors};
pub use tables::{TableDir, TableError};
