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
    // The last bytes as the low bytes of a word, as `from_le_bytes` of them zero-padded reads
    // (shifted in rather than copied: a copy of a length not known here is a `memcpy` call).
    let tail = chunks
        .remainder()
        .iter()
        .rev()
        .fold(0u64, |word, &b| word << 8 | u64::from(b));
    h = step(h, tail);
    // The length last, so that texts that differ only in trailing zero bytes differ.
    let h = step(h, bytes.len() as u64);
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    /// Snapshots keep these hashes: the values of texts of every tail length, pinned.
    #[test]
    fn the_hash_never_changes() {
        for (text, want) in [
            ("", 0x8181_f66f_d0c8_2e76_u64),
            ("a", 0xbf4d_38ad_a1fe_3b77),
            ("bash git status", 0x8372_7fd9_f93a_c0e0),
            (
                "read /home/u/proj/src/lib.rs lines 1-40",
                0x2b74_960f_2d9d_49d4,
            ),
            ("1234567", 0xf741_daef_eea3_c0b6),
            ("12345678", 0x438d_a45e_fdad_5cd1),
            ("123456789", 0xd56a_ea98_530b_ae17),
            ("é→x", 0xadbe_0b94_2940_62e7),
        ] {
            assert_eq!(super::hash(text), want, "{text:?}");
        }
    }
}
