//! The worker side of Zermelo, in two parts that never import each other upwards:
//!
//! * the slice solver, pure and synchronous: [`solver`] (the index's moves, init and retrograde
//!   passes of DESIGN §2, against any source of successor values), [`tables`] (successor values
//!   from table files, whole slices or one block at a time for probing, or held in memory),
//!   [`waves`] (waves of independent slices in one process), [`adjudicate`] (the declared rules
//!   `zermelo analyse --adjudicate` may use) and [`coord_game`] (Church's game of co-ordinate squares,
//!   COORD, where the pawns never move);
//! * the cluster node, `node` (with the feature `node`, on by default): the gRPC client of the coordinator and its slice cache
//!   (memory-mapped, hash-checked, evicted under a budget), which runs the solver on the tasks it
//!   leases.

pub mod adjudicate;
pub mod bytes;
pub mod coord_game;
#[cfg(feature = "node")]
pub mod node;
pub mod solver;
pub mod tables;
pub mod waves;

pub use solver::{
    bits_solvable, bits_state_bytes, init_together, solve_in_parts, solve_part, solve_slice,
    solve_slice_bits, solve_slice_into, solve_slice_resumable, solve_slices_into, splittable, Checkpoints,
    Crossed, Exchange, Sink, SolveError, Successors,
};
pub use tables::{TableDir, TableError};
