//! The hasher of name-keyed maps that are only looked up, never iterated into output.

/// A hash map keyed by names, hashed with [`NameHasher`]. Only looked up, never iterated into output.
pub(crate) type NameMap<K, V> = std::collections::HashMap<K, V, std::hash::BuildHasherDefault<NameHasher>>;

/// FxHash (rustc's hasher): a multiply and a rotate per word, and a final mix. Names are short and come
/// from a verified table or the package being compiled, so a keyed hash buys nothing here. Used by
/// [`LevelIndex`] and the checker's name maps.
#[derive(Default)]
pub struct NameHasher(u64);

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        // The last 1–7 bytes as one word, read as two overlapping halves (no copy, no loop). `str`'s `Hash`
        // writes a 0xff byte after the bytes, so names of different lengths still hash apart.
        let rest = chunks.remainder();
        let n = rest.len();
        let word = match rest {
            [] => return,
            [a, b, c, d, ..] => {
                let last = [rest[n - 4], rest[n - 3], rest[n - 2], rest[n - 1]];
                u64::from(u32::from_le_bytes([*a, *b, *c, *d])) | u64::from(u32::from_le_bytes(last)) << 32
            }
            [a, ..] => u64::from(*a) | u64::from(rest[n / 2]) << 8 | u64::from(rest[n - 1]) << 16,
        };
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(K);
    }

    fn write_u8(&mut self, b: u8) {
        self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    /// FxHash's state with a final mix (MurmurHash3's `fmix64`). A hash map takes its bucket from the low
    /// bits, and FxHash's last multiply leaves those depending on few bytes of a name: `T12345` and
    /// `T12399` would share a bucket. The mix spreads every bit over all of them.
    fn finish(&self) -> u64 {
        let mut k = self.0;
        k ^= k >> 33;
        k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
        k ^= k >> 33;
        k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        k ^ (k >> 33)
    }
}
