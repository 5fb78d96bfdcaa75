//! Slice keys on the wire (the proto's `SliceKey`), shared by the client and the cache's file
//! names.

use zermelo_chess::SliceKey;
use zermelo_proto as pb;

/// The wire form of a slice key.
pub(crate) fn key_to_wire(key: &SliceKey) -> pb::SliceKey {
    pb::SliceKey {
        material: key.material.to_string(),
        white_pawns: key.white_pawns.0,
        black_pawns: key.black_pawns.0,
    }
}
