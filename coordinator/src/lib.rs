//! The coordinator side of Zermelo. For now: the planner, which turns a job (materials) into its
//! graph of slices and orders it leaf-first. The single-node build (`zermelo solve`) and the
//! cluster use the same plan.
//!
//! ```
//! let plan = zermelo_coordinator::plan::plan(&["KPvK".parse().unwrap()]);
//! let names: Vec<String> = plan.materials.iter().map(|m| m.material.to_string()).collect();
//! assert_eq!(names, ["KBvK", "KNvK", "KQvK", "KRvK", "KPvK"]);
//! ```

pub mod plan;
