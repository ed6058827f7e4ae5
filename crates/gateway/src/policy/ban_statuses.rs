//! Origin statuses that count as a ban (`[gateway.bans] statuses`, or a client's own
//! `ban_statuses`), compiled to a bit set.

/// Origin statuses that mean a ban, as a set of the 4xx and 5xx codes (a copy per request
/// costs nothing, a look-up one shift).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct BanStatuses([u64; 4]);

impl BanStatuses {
    pub(crate) fn of(statuses: &[u16]) -> Self {
        let mut bits = [0u64; 4];
        for status in statuses.iter().filter(|s| (400..600).contains(*s)) {
            let i = usize::from(status - 400);
            bits[i / 64] |= 1 << (i % 64);
        }
        BanStatuses(bits)
    }

    pub(crate) fn contains(&self, status: u16) -> bool {
        (400..600).contains(&status) && {
            let i = usize::from(status - 400);
            self.0[i / 64] & (1 << (i % 64)) != 0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ban_statuses_are_a_set_of_error_codes() {
        let statuses = BanStatuses::of(&[403, 429, 599, 200, 600]);
        let cases = [
            (403, true),
            (429, true),
            (599, true),
            (404, false),
            (200, false),
            (600, false),
        ];
        for (status, banned) in cases {
            assert_eq!(statuses.contains(status), banned, "{status}");
        }
        assert!(!BanStatuses::of(&[]).contains(403));
    }
}
