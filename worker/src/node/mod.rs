//! The cluster node: a worker process's gRPC client of the coordinator ([`client`]) and its
//! slice cache ([`cache`]). It leases tasks and runs the pure slice solver of
//! [`crate::solver`] on them; the solver knows nothing of it.

use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use zermelo_proto::auth::ClientAuth;
use zermelo_proto::coordinator_client::CoordinatorClient;

pub mod cache;
pub mod client;
mod meet;

/// A client of the coordinator that sends the cluster token with every call (the worker's,
/// [`client`], and its parts' meetings, `meet`).
pub type Client = CoordinatorClient<InterceptedService<Channel, ClientAuth>>;
