//! The cluster as one node sees it: its `CLUSTER NODES` answer parsed into a [`View`]
//! (who owns which slots, who replicates whom, which configuration epoch it knows), and
//! the [`Shard`] a primary held before a fault.

/// The number of hash slots of every Redis Cluster.
pub const CLUSTER_SLOTS: u16 = 16384;

/// A node's role in the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterRole {
    /// Owns slots (or could: a primary without slots is still a primary).
    Primary,
    /// Replicates a primary and may be promoted when it fails.
    Replica,
}

/// The slots a primary owned and the ports of its replicas, taken just before a fault, so
/// that [`RedisCluster::wait_for_failover`] knows whom to expect in its place.
#[derive(Debug, Clone)]
pub(super) struct Shard {
    pub(super) slots: Vec<(u16, u16)>,
    pub(super) replicas: Vec<u16>,
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct NodeLine {
    pub(super) id: String,
    pub(super) port: u16,
    pub(super) primary: bool,
    /// Flagged `fail` (the majority agrees it is down), not just `fail?`.
    pub(super) failed: bool,
    pub(super) primary_id: Option<String>,
    pub(super) config_epoch: u64,
    pub(super) slots: Vec<(u16, u16)>,
}

/// One node's `CLUSTER NODES`: the cluster as that node sees it.
#[derive(Debug, Clone)]
pub(super) struct View {
    /// The node that answered.
    pub(super) from: u16,
    pub(super) lines: Vec<NodeLine>,
}

pub(super) fn parse_slot_range(field: &str) -> Option<(u16, u16)> {
    // `[5461->-id]` / `[5461-<-id]`: a slot being migrated or imported, not owned.
    if field.starts_with('[') {
        return None;
    }
    match field.split_once('-') {
        Some((start, end)) => Some((start.parse().ok()?, end.parse().ok()?)),
        None => {
            let slot = field.parse().ok()?;
            Some((slot, slot))
        }
    }
}

impl View {
    pub(super) fn parse(from: u16, text: &str) -> std::result::Result<Self, String> {
        let mut lines = Vec::new();
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let malformed = || format!("node {from}: malformed CLUSTER NODES line {line:?}");
            if fields.len() < 8 {
                return Err(malformed());
            }
            // `127.0.0.1:7000@17000[,hostname]`
            let address = fields[1].split(['@', ',']).next().unwrap_or_default();
            let port = address
                .rsplit_once(':')
                .and_then(|(_, port)| port.parse().ok())
                .ok_or_else(malformed)?;
            let flags: Vec<&str> = fields[2].split(',').collect();
            lines.push(NodeLine {
                id: fields[0].to_owned(),
                port,
                primary: flags.contains(&"master"),
                failed: flags.contains(&"fail"),
                primary_id: (fields[3] != "-").then(|| fields[3].to_owned()),
                config_epoch: fields[6].parse().map_err(|_| malformed())?,
                slots: fields[8..]
                    .iter()
                    .filter_map(|field| parse_slot_range(field))
                    .collect(),
            });
        }
        Ok(Self { from, lines })
    }

    /// The highest config epoch this node knows of: a node that has not heard of the
    /// latest failover yet (one just restarted, say) knows a lower one.
    pub(super) fn freshness(&self) -> u64 {
        self.lines
            .iter()
            .map(|line| line.config_epoch)
            .max()
            .unwrap_or(0)
    }

    pub(super) fn by_port(&self, port: u16) -> Option<&NodeLine> {
        self.lines.iter().find(|line| line.port == port)
    }

    pub(super) fn by_id(&self, id: &str) -> Option<&NodeLine> {
        self.lines.iter().find(|line| line.id == id)
    }

    pub(super) fn owner_of(&self, slot: u16) -> Option<&NodeLine> {
        self.lines.iter().find(|line| {
            line.slots
                .iter()
                .any(|&(start, end)| (start..=end).contains(&slot))
        })
    }

    /// Slot ranges with the port of their owner, sorted: two views agree on the slots
    /// exactly when these are equal.
    pub(super) fn slot_map(&self) -> Vec<(u16, u16, u16)> {
        let mut map: Vec<(u16, u16, u16)> = self
            .lines
            .iter()
            .flat_map(|line| {
                line.slots
                    .iter()
                    .map(|&(start, end)| (start, end, line.port))
            })
            .collect();
        map.sort_unstable();
        map
    }

    pub(super) fn covered_slots(&self) -> usize {
        self.slot_map()
            .iter()
            .map(|&(start, end, _)| usize::from(end - start) + 1)
            .sum()
    }

    /// A node's role and, for a replica, its primary's port (0 when the primary is unknown).
    pub(super) fn role_of(&self, port: u16) -> Option<(ClusterRole, u16)> {
        let line = self.by_port(port)?;
        if line.primary {
            return Some((ClusterRole::Primary, 0));
        }
        let primary = line
            .primary_id
            .as_deref()
            .and_then(|id| self.by_id(id))
            .map_or(0, |primary| primary.port);
        Some((ClusterRole::Replica, primary))
    }

    /// Ports of the primaries that own slots and are not failed, by their first slot.
    pub(super) fn serving_primaries(&self) -> Vec<u16> {
        let mut primaries: Vec<(u16, u16)> = self
            .lines
            .iter()
            .filter(|line| line.primary && !line.failed)
            .filter_map(|line| {
                let first = line.slots.iter().map(|&(start, _)| start).min()?;
                Some((first, line.port))
            })
            .collect();
        primaries.sort_unstable();
        primaries.into_iter().map(|(_, port)| port).collect()
    }

    pub(super) fn shard_of(&self, port: u16) -> Option<Shard> {
        let line = self.by_port(port)?;
        if !line.primary || line.slots.is_empty() {
            return None;
        }
        let replicas = self
            .lines
            .iter()
            .filter(|other| other.primary_id.as_deref() == Some(line.id.as_str()))
            .map(|other| other.port)
            .collect();
        Some(Shard {
            slots: line.slots.clone(),
            replicas,
        })
    }

    pub(super) fn summary(&self) -> String {
        let owners: Vec<String> = self
            .slot_map()
            .iter()
            .map(|(start, end, port)| format!("{start}-{end}@{port}"))
            .collect();
        format!("slots [{}]", owners.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines_are_parsed() {
        let text = "\
07c3 127.0.0.1:30004@31004,host slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
e7d1 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 [5461->-67ed]
9fd8 127.0.0.1:30003@31003 master,fail - 1426238317741 1426238316232 3 disconnected 10923-16383
";
        let view = View::parse(30001, text).unwrap();
        assert_eq!(view.lines.len(), 4);
        assert_eq!(view.role_of(30004), Some((ClusterRole::Replica, 30001)));
        assert_eq!(view.role_of(30002), Some((ClusterRole::Primary, 0)));
        assert_eq!(view.owner_of(0).unwrap().port, 30001);
        assert_eq!(view.owner_of(5461).unwrap().port, 30002);
        assert_eq!(view.owner_of(16383).unwrap().port, 30003);
        assert_eq!(view.covered_slots(), usize::from(CLUSTER_SLOTS));
        assert_eq!(view.freshness(), 4);
        // The failed primary still owns its slots but no longer serves them.
        assert_eq!(view.serving_primaries(), [30001, 30002]);
        let shard = view.shard_of(30001).unwrap();
        assert_eq!(
            (shard.slots, shard.replicas),
            (vec![(0, 5460)], vec![30004])
        );
        assert!(view.shard_of(30004).is_none());
        assert!(View::parse(1, "garbage line").is_err());
    }
}
