//! Where the solver of a large slice stands, for a progress bar or a progress log line: the
//! positions written move only when a slice's values are written out, after its passes, so a
//! bar of a large pawnless table would stand still for most of its build. The passes of a slice
//! of [`STAGE_FROM`] positions or more say here what they are at ("KRNvKNN: White's wins, ply
//! 37"); the caller reads it with [`stage`].

use std::sync::Mutex;

/// Slices of this many positions or more report their stage.
pub const STAGE_FROM: u64 = 1 << 27;

static STAGE: Mutex<String> = Mutex::new(String::new());

/// What the solver of a large slice is at now, if one runs ("" if none).
pub fn stage() -> String {
    STAGE.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The stage of one slice's solve, cleared when it is dropped.
pub(super) struct Stage {
    on: bool,
}

impl Stage {
    /// The stage of a slice of `n` positions: reported only from [`STAGE_FROM`] positions.
    pub(super) fn new(n: u64) -> Stage {
        Stage { on: n >= STAGE_FROM }
    }

    /// Says what the solve is at now.
    pub(super) fn say(&self, what: std::fmt::Arguments<'_>) {
        if self.on {
            let mut s = STAGE.lock().unwrap_or_else(|e| e.into_inner());
            s.clear();
            std::fmt::Write::write_fmt(&mut *s, what).expect("a string takes any text");
        }
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        if self.on {
            STAGE.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large slice's stage is seen until its solve ends; a small one's never.
    #[test]
    fn a_large_slice_says_its_stage_until_it_ends() {
        let small = Stage::new(STAGE_FROM - 1);
        small.say(format_args!("small"));
        assert_eq!(stage(), "");
        drop(small);
        let large = Stage::new(STAGE_FROM);
        large.say(format_args!("KRNvKNN: White's wins, ply {}", 37));
        assert_eq!(stage(), "KRNvKNN: White's wins, ply 37");
        drop(large);
        assert_eq!(stage(), "");
    }
}
