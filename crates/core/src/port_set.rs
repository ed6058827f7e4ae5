//! [`PortSet`]: the destination ports a gateway client may reach, written `"*"` (any port)
//! or as a list of ports (`[80, 443]`). The gateway's `[gateway.destinations] ports` and a
//! client's `allowed_ports` override both use it, and the override travels to gateways in
//! the snapshot ([`crate::control::GatewayClient`]).

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// Destination ports: every port, or exactly the listed ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortSet {
    /// `"*"`: any port.
    Any,
    /// Only these ports (kept sorted and without duplicates). Empty allows nothing; the
    /// configuration refuses an empty list, so it only arises when built by hand.
    Only(BTreeSet<u16>),
}

impl PortSet {
    /// The ports a gateway allows unless configured otherwise: HTTP, HTTPS and their usual
    /// alternates.
    pub const DEFAULT: [u16; 4] = [80, 443, 8080, 8443];

    /// Exactly `ports`.
    pub fn only(ports: impl IntoIterator<Item = u16>) -> Self {
        PortSet::Only(ports.into_iter().collect())
    }

    /// Whether `port` is allowed.
    pub fn contains(&self, port: u16) -> bool {
        match self {
            PortSet::Any => true,
            PortSet::Only(ports) => ports.contains(&port),
        }
    }
}

impl Default for PortSet {
    fn default() -> Self {
        PortSet::only(Self::DEFAULT)
    }
}

impl fmt::Display for PortSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortSet::Any => f.write_str("*"),
            PortSet::Only(ports) => {
                let list: Vec<String> = ports.iter().map(u16::to_string).collect();
                write!(f, "[{}]", list.join(", "))
            }
        }
    }
}

impl Serialize for PortSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            PortSet::Any => serializer.serialize_str("*"),
            PortSet::Only(ports) => serializer.collect_seq(ports),
        }
    }
}

impl<'de> Deserialize<'de> for PortSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PortSetVisitor;

        impl<'de> Visitor<'de> for PortSetVisitor {
            type Value = PortSet;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"*\" (any port) or a list of ports such as [80, 443]")
            }

            fn visit_str<E: de::Error>(self, value: &str) -> Result<PortSet, E> {
                if value == "*" {
                    Ok(PortSet::Any)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(value), &self))
                }
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<PortSet, A::Error> {
                let mut ports = BTreeSet::new();
                while let Some(port) = seq.next_element::<u16>()? {
                    ports.insert(port);
                }
                Ok(PortSet::Only(ports))
            }
        }

        deserializer.deserialize_any(PortSetVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_or_a_list_round_trips() {
        let any: PortSet = serde_json::from_str("\"*\"").unwrap();
        assert_eq!(any, PortSet::Any);
        assert!(any.contains(22));
        assert_eq!(serde_json::to_string(&any).unwrap(), "\"*\"");
        let list: PortSet = serde_json::from_str("[443, 80, 443]").unwrap();
        assert_eq!(list, PortSet::only([80, 443]));
        assert!(list.contains(80) && !list.contains(22));
        assert_eq!(serde_json::to_string(&list).unwrap(), "[80,443]");
        assert!(serde_json::from_str::<PortSet>("\"any\"").is_err());
        assert!(serde_json::from_str::<PortSet>("[70000]").is_err());
        assert!(serde_json::from_str::<PortSet>("80").is_err());
    }

    #[test]
    fn defaults_to_web_ports() {
        let ports = PortSet::default();
        for port in [80, 443, 8080, 8443] {
            assert!(ports.contains(port));
        }
        assert!(!ports.contains(6379));
        assert_eq!(ports.to_string(), "[80, 443, 8080, 8443]");
    }
}
