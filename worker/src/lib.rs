//! The worker side of Zermelo: solving one slice against the finished values of its successors.
//!
//! [`solve::solve_slice`] is the slice solver of DESIGN §2; [`tables`] reads finished tables
//! from a directory for the solver (whole slices) and for probing (one block at a time); [`cache`]
//! is a cluster worker's slice cache (memory-mapped, hash-checked, evicted under a budget);
//! [`client`] is the cluster worker, a gRPC client of the coordinator.

pub mod cache;
pub mod client;
pub mod par;
pub mod solve;
pub mod tables;

pub use solve::{solve_slice, SolveError, Successors};
pub use tables::{TableDir, TableError};
