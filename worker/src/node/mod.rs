//! The cluster node: a worker process's gRPC client of the coordinator ([`client`]) and its
//! slice cache ([`cache`]). It leases tasks and runs the pure slice solver of
//! [`crate::solver`] on them; the solver knows nothing of it.

pub mod cache;
pub mod client;
mod meet;
