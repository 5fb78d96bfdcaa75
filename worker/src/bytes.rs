//! Sizes in bytes as people write and read them: `--memory 16GiB`, `4.0 GiB` in messages.

use std::fmt;
use std::str::FromStr;

/// A size in bytes, written as a plain number of bytes (`1048576`) or with a unit: `KiB`,
/// `MiB`, `GiB`, `TiB` (powers of 1024, also written `K`, `M`, `G`, `T`) or `KB`, `MB`, `GB`,
/// `TB` (powers of 1000); the unit's case does not matter, a space before it is allowed.
///
/// ```
/// use zermelo_worker::bytes::ByteSize;
/// assert_eq!("512MiB".parse::<ByteSize>().unwrap(), ByteSize(512 << 20));
/// assert_eq!("2 GiB".parse::<ByteSize>().unwrap(), ByteSize(2 << 30));
/// assert_eq!("1500".parse::<ByteSize>().unwrap(), ByteSize(1500));
/// assert!("2 parsecs".parse::<ByteSize>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

/// A size that [`ByteSize`] does not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a size: {reason} (write e.g. 4GiB, 512MiB or 1000000)")]
pub struct BadSize {
    pub input: String,
    pub reason: &'static str,
}

impl FromStr for ByteSize {
    type Err = BadSize;

    fn from_str(s: &str) -> Result<ByteSize, BadSize> {
        let bad = |reason| BadSize {
            input: s.to_owned(),
            reason,
        };
        let t = s.trim();
        let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        if digits == 0 {
            return Err(bad("it does not start with a number"));
        }
        let number: u64 = t[..digits].parse().map_err(|_| bad("the number is too large"))?;
        let unit = t[digits..].trim_start().to_ascii_lowercase();
        let scale: u64 = match unit.as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "t" | "tib" => 1 << 40,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            "tb" => 1_000_000_000_000,
            _ => return Err(bad("unknown unit (B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)")),
        };
        number
            .checked_mul(scale)
            .map(ByteSize)
            .ok_or_else(|| bad("it does not fit in 64 bits"))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1 << 40, "TiB"),
            (1 << 30, "GiB"),
            (1 << 20, "MiB"),
            (1 << 10, "KiB"),
        ];
        for (scale, unit) in UNITS {
            if self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{}{unit}", self.0 / scale);
            }
        }
        write!(f, "{}", self.0)
    }
}

/// Bytes for messages, in the largest binary unit that keeps a number of at least 1, with one
/// decimal: `129.9 KiB`, `17.8 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}
