//! The coordinator side of Zermelo:
//!
//! * [`plan`]: the planner, which turns a job (materials) into its graph of slices and orders it
//!   leaf-first. The single-node build (`zermelo solve`) and the cluster use the same plan.
//! * [`schedule`]: the scheduler, a pure state machine that groups a plan's slices into tasks,
//!   leases them to workers leaf-first with a time-to-live, and checks completions by hash.
//! * `journal.rs`: the durable, append-only record of jobs taken and slices finished, from which
//!   a restarted coordinator resumes ([`Journal`]).
//! * `service/`: all of the above as the gRPC service `zermelo.v1.Coordinator` ([`serve`],
//!   [`ServiceConfig`]), with the finished slices kept in a store (`store.rs`, read through
//!   [`Files`]) and each material's table written when done.
//!
//! The planner and the scheduler are the crate's models, public modules; the service's insides
//! are private, and what other crates use of them is re-exported here.
//!
//! ```
//! let plan = zermelo_coordinator::plan::plan(&["KPvK".parse().unwrap()]);
//! let names: Vec<String> = plan.materials.iter().map(|m| m.material.to_string()).collect();
//! assert_eq!(names, ["KBvK", "KNvK", "KQvK", "KRvK", "KPvK"]);
//! ```

#[cfg(feature = "service")]
mod check;
#[cfg(feature = "service")]
mod journal;
#[cfg(feature = "service")]
mod metrics;
pub mod plan;
#[cfg(feature = "service")]
pub mod schedule;
#[cfg(feature = "service")]
mod service;
#[cfg(feature = "service")]
mod store;

#[cfg(feature = "service")]
pub use check::{DEFAULT_SAMPLE, WHOLE_POSITIONS};
#[cfg(feature = "service")]
pub use journal::{Journal, JournalError, Record};
#[cfg(feature = "service")]
pub use service::{serve, serve_with_metrics, ServiceConfig, ServiceError, TlsIdentity};
#[cfg(feature = "service")]
pub use store::{FileReader, Files, Reading};
