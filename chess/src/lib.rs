//! Chess rules for Zermelo.
//!
//! Bitboards and attack tables ([`attacks`]), legal moves ([`movegen`]) and in-slice un-moves
//! ([`unmove`]), FEN, SAN and UCI ([`fen`], [`san`]), material names ([`material`]), slices,
//! their graph and the position index ([`slice`], [`index`]).
//!
//! ```
//! use zermelo_chess::{Position, Material};
//! let pos: Position = "8/8/8/8/8/8/4P3/4K2k w - - 0 1".parse().unwrap();
//! assert_eq!(Material::of(&pos.board).to_string(), "KPvK");
//! ```

pub mod attacks;
pub mod dtz;
pub mod fen;
pub mod index;
pub mod material;
pub mod movegen;
pub mod position;
pub mod probe;
pub mod san;
pub mod slice;
pub mod types;
pub mod unmove;
pub mod value;

pub use dtz::Dtz;
pub use fen::FenError;
pub use material::{Material, MaterialError};
pub use movegen::{IllegalPosition, MoveList};
pub use position::{Board, Move, Position};
pub use san::MoveParseError;
pub use slice::SliceKey;
pub use types::{Bitboard, Color, Piece, Role, Square};
pub use value::Value;
