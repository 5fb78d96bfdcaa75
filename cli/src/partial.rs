//! lichess's answer for a position no table holds as it stands (lila-tablebase a06a88b,
//! `src/tablebases.rs` 79-87 and 160-194): castling rights that stand, more men than the
//! tables have, or a table that is missing. It is still answered, with 200: the position's
//! `dtz` and `dtm` are `null`, each move is probed if the position after it can be (a capture
//! down into the tables, a move that gives up every castling right) and is `"unknown"`
//! otherwise, and the position's category is the opposite of its best move's
//! ([`partial_answer`]).

use zermelo_chess::probe::{self, DtzSource, ValueSource};
use zermelo_chess::{Material, Position, Role};
use zermelo_worker::tables::TableError;

use crate::lichess::{castle, castling_moves, rights_after, Asked, Castle};
use crate::probe::{insufficient_material, set_dtz, settle, MoveInfo, PositionInfo, ProbeInfo};

/// What the tables can say of `pos` (the halfmove clock `clock` there, `before` the clock
/// before the move into it) when it has no castling rights: its DTM and its DTZ50 where their
/// tables are, into `info` (left unknown where they are not), and the category as lichess
/// derives it: a stalemate or a dead position is a draw, checkmate a loss (blessed once the
/// clock before the move reached 100), else by DTZ50 and the clock, else by the mates, else
/// unknown.
fn fill_what_is_known<M, D>(
    info: &mut PositionInfo,
    pos: &Position,
    clock: u16,
    before: u16,
    mates: &M,
    dtz: &D,
) -> Result<(), TableError>
where
    M: ValueSource<Error = TableError> + ?Sized,
    D: DtzSource<Error = TableError> + ?Sized,
{
    let missing = |e: &TableError| matches!(e, TableError::Missing { .. });
    info.category = "unknown";
    if Material::of(&pos.board).men() <= crate::MAX_MEN {
        match probe::value(pos, mates) {
            Ok(v) => {
                let known = PositionInfo::new(pos, v);
                info.dtm = known.dtm;
                info.category = known.category;
            }
            Err(e) if missing(&e) => {}
            Err(e) => return Err(e),
        }
        match probe::dtz(pos, dtz) {
            Ok(d) => set_dtz(info, d, clock, before),
            Err(e) if missing(&e) => {}
            Err(e) => return Err(e),
        }
    }
    if info.stalemate || info.insufficient_material {
        info.category = "draw";
    } else if info.checkmate {
        info.category = if before >= zermelo_chess::dtz::RULE_PLIES {
            "blessed-loss"
        } else {
            "loss"
        };
    }
    Ok(())
}

/// An empty position record for `pos` with rights `rights` standing: the flags, nothing known.
fn flags_of(pos: &Position, rights: &[Castle]) -> PositionInfo {
    let no_move = pos.legal_moves().is_empty() && castling_moves(pos, rights).is_empty();
    PositionInfo {
        checkmate: pos.is_check() && no_move,
        stalemate: !pos.is_check() && no_move,
        variant_win: false,
        variant_loss: false,
        insufficient_material: insufficient_material(pos),
        dtz: None,
        precise_dtz: None,
        dtm: None,
        dtw: None,
        dtc: None,
        category: "unknown",
    }
}

/// lichess's answer for a position no table holds as it stands (castling rights, more men than
/// the tables have, a missing table): the position's `dtz` and `dtm` `null`, every legal move
/// (castling included) with what the tables say of the position after it when that position
/// has no castling rights left and its tables are here ([`fill_what_is_known`]), `"unknown"`
/// otherwise; moves in lichess's order, and the position's category the opposite of the first
/// move's (with no move: a loss when checkmated, else a draw).
pub fn partial_answer<M, D>(fen: &str, asked: &Asked, mates: &M, dtz: &D) -> Result<ProbeInfo, TableError>
where
    M: ValueSource<Error = TableError> + ?Sized,
    D: DtzSource<Error = TableError> + ?Sized,
{
    let pos = &asked.pos;
    let clock = asked.clock;
    let mut moves = Vec::new();
    let mut add = |uci: String,
                   san: String,
                   role: Role,
                   capture: Option<Role>,
                   promotion: Option<Role>,
                   after: Position,
                   rights: Vec<Castle>|
     -> Result<(), TableError> {
        let zeroing = capture.is_some() || role == Role::Pawn;
        let mut info = flags_of(&after, &rights);
        let after_clock = if zeroing { 0 } else { clock.saturating_add(1) };
        if rights.is_empty() {
            fill_what_is_known(&mut info, &after, after_clock, clock, mates, dtz)?;
        } else if info.stalemate || info.insufficient_material {
            info.category = "draw";
        } else if info.checkmate {
            info.category = if clock >= zermelo_chess::dtz::RULE_PLIES {
                "blessed-loss"
            } else {
                "loss"
            };
        }
        moves.push(MoveInfo::with(uci, san, zeroing, capture, promotion, info));
        Ok(())
    };
    for m in pos.legal_moves().iter() {
        let rights = rights_after(&asked.castling, pos.turn, m.from, m.to, m.role == Role::King);
        add(
            m.uci(),
            pos.san(m),
            m.role,
            m.capture,
            m.promotion,
            pos.play(m),
            rights,
        )?;
    }
    for c in castling_moves(pos, &asked.castling) {
        let after = castle(pos, c);
        let rights: Vec<Castle> = asked
            .castling
            .iter()
            .copied()
            .filter(|r| r.color != c.color)
            .collect();
        let mut san = if c.king_side { "O-O" } else { "O-O-O" }.to_string();
        if after.is_check() {
            san.push(if after.legal_moves().is_empty() { '#' } else { '+' });
        }
        add(c.uci(), san, Role::King, None, None, after, rights)?;
    }
    let mut pos_info = flags_of(pos, &asked.castling);
    if pos_info.stalemate || pos_info.insufficient_material {
        pos_info.category = "draw";
    } else if pos_info.checkmate {
        let before = clock.saturating_sub(1);
        pos_info.category = if before >= zermelo_chess::dtz::RULE_PLIES {
            "blessed-loss"
        } else {
            "loss"
        };
    }
    // The categories ignore the rule unless some DTZ50 table gave one.
    let ignores_50_move_rule = moves.iter().all(|m| m.after.dtz.is_none());
    let mut info = ProbeInfo {
        fen: fen.to_string(),
        pos: pos_info,
        ignores_50_move_rule,
        moves,
    };
    settle(&mut info);
    Ok(info)
}
