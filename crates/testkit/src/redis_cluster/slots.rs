//! Keys to slots: the CRC16 Redis Cluster hashes keys with, and the hash-tag rule.

use super::{CLUSTER_SLOTS, RedisCluster};

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster
/// maps keys to slots with.
pub(super) fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (0..8).fold(crc ^ (u16::from(byte) << 8), |crc, _| {
            if crc & 0x8000 == 0 {
                crc << 1
            } else {
                (crc << 1) ^ 0x1021
            }
        })
    })
}

impl RedisCluster {
    /// The slot of `key`, as Redis computes it: CRC16 of the key, or of its hash tag (what
    /// lies between the first `{` and the next `}`, when that is not empty), modulo 16384.
    pub fn key_slot(key: impl AsRef<[u8]>) -> u16 {
        let key = key.as_ref();
        let hashed = key
            .iter()
            .position(|&byte| byte == b'{')
            .and_then(|open| {
                let tag = &key[open + 1..];
                let close = tag.iter().position(|&byte| byte == b'}')?;
                (close > 0).then(|| &tag[..close])
            })
            .unwrap_or(key);
        crc16(hashed) % CLUSTER_SLOTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_the_xmodem_variant_redis_uses() {
        // The check value of the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn key_slots_follow_the_hash_tag_rule() {
        assert_eq!(RedisCluster::key_slot("foo"), 12182);
        assert_eq!(RedisCluster::key_slot("{a}x"), RedisCluster::key_slot("a"));
        assert_eq!(
            RedisCluster::key_slot("{user1000}.following"),
            RedisCluster::key_slot("{user1000}.followers")
        );
        // An empty tag does not count: the whole key is hashed.
        assert_eq!(RedisCluster::key_slot("{}x"), crc16(b"{}x") % CLUSTER_SLOTS);
        // Only the first `{` and the first `}` after it count.
        assert_eq!(
            RedisCluster::key_slot("x{{a}}"),
            RedisCluster::key_slot("{a")
        );
        assert_eq!(
            RedisCluster::key_slot("x{a}{b}"),
            RedisCluster::key_slot("a")
        );
        assert_eq!(RedisCluster::key_slot("x{a"), crc16(b"x{a") % CLUSTER_SLOTS);
    }
}
