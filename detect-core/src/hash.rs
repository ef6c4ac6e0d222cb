//! The 64-bit hash of a text that the detector keeps: of call identities and results
//! ([`crate::progress`]) and of the names a span refers to ([`crate::names`]).

/// A 64-bit hash of `text`, eight bytes at a time. Written here rather than taken from a hasher
/// crate because snapshots keep these hashes: the function must never change with a dependency.
pub(crate) fn hash(text: &str) -> u64 {
    mix(0x243f_6a88_85a3_08d3, text)
}

/// `text` folded into `state` (a different `state` gives a different hash of the same text).
pub(crate) fn mix(state: u64, text: &str) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, word: u64| (h.rotate_left(5) ^ word).wrapping_mul(K);
    let bytes = text.as_bytes();
    let mut chunks = bytes.chunks_exact(8);
    let mut h = state;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        h = step(h, u64::from_le_bytes(word));
    }
    let mut tail = [0u8; 8];
    tail[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    h = step(h, u64::from_le_bytes(tail));
    // The length last, so that texts that differ only in trailing zero bytes differ.
    let h = step(h, bytes.len() as u64);
    h ^ (h >> 29)
}
