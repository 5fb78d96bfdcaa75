//! Wire protocol between the Zermelo coordinator and its workers.
//!
//! This crate is a placeholder. The gRPC services (task leasing, slice transfer,
//! heartbeats, job submission and status) arrive with the cluster issue (#3); until then it
//! only fixes the protocol version that both sides will check at registration.

/// Version of the coordinator/worker protocol. Bumped on any incompatible wire change.
pub const PROTOCOL_VERSION: u32 = 1;
