//! Little-endian fields of the solver's scratch files (checkpoints and the marks of their logs
//! of plies), and the error of a field that does not hold.

use std::io::{self, Read, Write};

pub(super) fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}

pub(super) fn put_u32(w: &mut (impl Write + ?Sized), v: u32) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}

pub(super) fn put_u64(w: &mut (impl Write + ?Sized), v: u64) -> io::Result<()> {
    w.write_all(&v.to_le_bytes())
}

pub(super) fn get_u32(r: &mut (impl Read + ?Sized)) -> io::Result<u32> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

pub(super) fn get_u64(r: &mut (impl Read + ?Sized)) -> io::Result<u64> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

/// A count read from a scratch file, refused past `most`.
pub(super) fn get_len(r: &mut (impl Read + ?Sized), most: u64) -> io::Result<u64> {
    let n = get_u64(r)?;
    if n > most {
        return Err(invalid(format!("a count of {n}, past {most}")));
    }
    Ok(n)
}
