//! A fast keyed hasher for the fixed-size bucket keys.
//!
//! std's SipHash costs more than the rest of a check. Keys here are three machine words, so a
//! folded 64x64→128 multiply per word (the construction behind foldhash and ahash's fallback)
//! is enough. The two seeds come from std's `RandomState`, i.e. from the OS, per engine, so a
//! client choosing its addresses cannot predict which keys collide.

use std::hash::{BuildHasher, Hasher, RandomState};

/// Odd 64-bit constants (digits of pi) that spread bits in the multiplies.
const MIX_A: u64 = 0x243f_6a88_85a3_08d3;
const MIX_B: u64 = 0x1319_8a2e_0370_7344;

#[derive(Debug, Clone)]
pub(crate) struct KeyHasherBuilder {
    seed: u64,
    key: u64,
}

impl KeyHasherBuilder {
    pub(crate) fn random() -> Self {
        let random = RandomState::new();
        Self {
            seed: random.hash_one(MIX_A),
            // Forcing the low bit keeps the multiplier odd, so no input bit is ever lost.
            key: random.hash_one(MIX_B) | 1,
        }
    }
}

impl BuildHasher for KeyHasherBuilder {
    type Hasher = KeyHasher;

    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            state: self.seed,
            key: self.key,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct KeyHasher {
    state: u64,
    key: u64,
}

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for types other than the engine's keys; correct, not tuned.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u32(&mut self, value: u32) {
        self.write_u64(u64::from(value));
    }

    fn write_u64(&mut self, value: u64) {
        self.state = folded_multiply(self.state ^ value, self.key ^ MIX_A);
    }

    fn finish(&self) -> u64 {
        // A last multiply so the top bits (the map's tag bits) and the middle bits (the
        // shard index) both depend on every input bit.
        folded_multiply(self.state, MIX_B)
    }
}

fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn spreads_sequential_keys_over_shards_and_tags() {
        let builder = KeyHasherBuilder::random();
        let mut shards = HashSet::new();
        let mut tags = HashSet::new();
        for address in 0u64..4096 {
            let hash = builder.hash_one((7u32, 0u64, address));
            shards.insert((hash >> 40) & 255);
            tags.insert(hash >> 57);
        }
        assert_eq!(shards.len(), 256);
        assert_eq!(tags.len(), 128);
    }

    #[test]
    fn seeds_differ_between_builders() {
        let a = KeyHasherBuilder::random().hash_one(42u64);
        let b = KeyHasherBuilder::random().hash_one(42u64);
        assert_ne!(a, b);
    }
}
