//! Hashing for bucket keys: computed once, when a key is made, and stored in the key.
//!
//! std's SipHash costs more than the rest of a check. Keys here are three machine words, so a
//! folded 64x64→128 multiply per word (the construction behind foldhash and ahash's fallback)
//! is enough. The seeds come from std's `RandomState`, i.e. from the OS, once per process, so
//! a client choosing its addresses cannot predict which keys collide, and a key made for one
//! engine is valid in every engine of the process.
//!
//! The maps then use [`StoredHash`]: it hands the stored value through instead of hashing
//! again, so a check that reuses a key (a connection's cached scope) hashes nothing at all.

use std::hash::{BuildHasher, Hasher, RandomState};
use std::sync::OnceLock;

/// An odd 64-bit constant (digits of pi) that spreads bits in the final multiply.
const MIX_B: u64 = 0x1319_8a2e_0370_7344;

struct Seeds {
    initial: u64,
    multiplier: u64,
}

fn seeds() -> &'static Seeds {
    static SEEDS: OnceLock<Seeds> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let random = RandomState::new();
        Seeds {
            initial: random.hash_one(MIX_B.rotate_left(17)),
            multiplier: random.hash_one(MIX_B),
        }
    })
}

/// The keyed hash of one bucket key: two folded multiplies, as foldhash does for 16 bytes.
#[inline]
pub(crate) fn hash_words(high: u64, low: u64, scope: u32) -> u64 {
    let seeds = seeds();
    // The scope rides in the top half of the first word's mask: addresses are masked by
    // prefix, so their own top bits vary, and the multiply mixes both into every output bit.
    let mixed = folded_multiply(
        high ^ seeds.initial ^ (u64::from(scope) << 32).rotate_left(7),
        low ^ seeds.multiplier,
    );
    // A second multiply so the top bits (the map's tag bits) and the middle bits (the
    // shard index) both depend on every input bit.
    folded_multiply(mixed ^ u64::from(scope), (MIX_B ^ seeds.initial) | 1)
}

fn folded_multiply(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// A `BuildHasher` for keys that carry their own hash: the map gets it back unchanged.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StoredHash;

impl BuildHasher for StoredHash {
    type Hasher = StoredHashHasher;

    fn build_hasher(&self) -> StoredHashHasher {
        StoredHashHasher(0)
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct StoredHashHasher(u64);

impl Hasher for StoredHashHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only the key's `write_u64` of its stored hash is expected; anything else is still
        // folded in (correct, not tuned) rather than ignored.
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 ^= value;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn spreads_sequential_keys_over_shards_and_tags() {
        let mut shards = HashSet::new();
        let mut tags = HashSet::new();
        for address in 0u64..4096 {
            let hash = hash_words(0, address, 7);
            shards.insert((hash >> 40) & 255);
            tags.insert(hash >> 57);
        }
        assert_eq!(shards.len(), 256);
        assert_eq!(tags.len(), 128);
    }

    #[test]
    fn every_word_matters() {
        let base = hash_words(1, 2, 3);
        assert_ne!(base, hash_words(0, 2, 3));
        assert_ne!(base, hash_words(1, 0, 3));
        assert_ne!(base, hash_words(1, 2, 0));
        assert_eq!(base, hash_words(1, 2, 3));
    }

    #[test]
    fn stored_hash_passes_through() {
        assert_eq!(StoredHash.hash_one(0xdead_beef_u64), 0xdead_beef);
    }
}
