//! The coordinator side of Zermelo:
//!
//! * [`plan`]: the planner, which turns a job (materials) into its graph of slices and orders it
//!   leaf-first. The single-node build (`zermelo solve`) and the cluster use the same plan.
//! * [`schedule`]: the scheduler, a pure state machine that groups a plan's slices into tasks,
//!   leases them to workers leaf-first with a time-to-live, and checks completions by hash.
//! * [`journal`]: the durable, append-only record of jobs taken and slices finished, from which a
//!   restarted coordinator resumes.
//! * [`service`]: all of the above as the gRPC service `zermelo.v1.Coordinator` ([`service::serve`]),
//!   with the finished slices kept in a [`store`] and each material's table written when done.
//!
//! ```
//! let plan = zermelo_coordinator::plan::plan(&["KPvK".parse().unwrap()]);
//! let names: Vec<String> = plan.materials.iter().map(|m| m.material.to_string()).collect();
//! assert_eq!(names, ["KBvK", "KNvK", "KQvK", "KRvK", "KPvK"]);
//! ```

#[cfg(feature = "service")]
pub mod check;
#[cfg(feature = "service")]
pub mod journal;
#[cfg(feature = "service")]
pub mod metrics;
pub mod plan;
#[cfg(feature = "service")]
pub mod schedule;
#[cfg(feature = "service")]
pub mod service;
#[cfg(feature = "service")]
pub mod store;
