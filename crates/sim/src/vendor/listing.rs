//! What the vendor list says about each proxy, and how a list is written out in the
//! formats the controller's reconciler reads, with malformed entries mixed in on demand.

use std::net::Ipv4Addr;

use serde_json::{Map, Value, json};

use crate::upstream::{ProxyKind, UpstreamProxy};

/// One proxy as the vendor lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Host clients connect to (the proxy's listen address).
    pub host: String,
    /// Port clients connect to.
    pub port: u16,
    /// Protocol.
    pub protocol: ProxyKind,
    /// Username, when the proxy needs credentials.
    pub username: Option<String>,
    /// Password, when the proxy needs credentials.
    pub password: Option<String>,
    /// Region label.
    pub region: Option<String>,
    /// Carrier label.
    pub carrier: Option<String>,
    /// When the vendor retires it (ms since the Unix epoch); `None` = no TTL.
    pub expires_at_ms: Option<u64>,
    /// When the vendor issued it (ms since the Unix epoch).
    pub issued_at_ms: u64,
    /// Its exit address. Not part of the served list (vendors do not say); for tests.
    pub exit_ip: Ipv4Addr,
}

impl Listing {
    pub(super) fn of(proxy: &UpstreamProxy, expires_at_ms: Option<u64>, issued_at_ms: u64) -> Self {
        let (username, password) = match proxy.credentials() {
            Some((u, p)) => (Some(u.to_owned()), Some(p.to_owned())),
            None => (None, None),
        };
        Self {
            host: proxy.addr().ip().to_string(),
            port: proxy.addr().port(),
            protocol: proxy.kind(),
            username,
            password,
            region: proxy.region().map(str::to_owned),
            carrier: proxy.carrier().map(str::to_owned),
            expires_at_ms,
            issued_at_ms,
            exit_ip: proxy.exit_ip(),
        }
    }

    /// `host:port[:user:pass]`, with `scheme://` in front when `with_scheme`.
    pub fn text_line(&self, with_scheme: bool) -> String {
        let mut line = String::new();
        if with_scheme {
            line.push_str(self.protocol.scheme());
            line.push_str("://");
        }
        line.push_str(&format!("{}:{}", self.host, self.port));
        if let (Some(user), Some(pass)) = (&self.username, &self.password) {
            line.push_str(&format!(":{user}:{pass}"));
        }
        line
    }

    /// The line in the `shape`-th accepted text shape, cycling: `host:port`,
    /// `host:port:user:pass`, `user:pass@host:port`, `scheme://user:pass@host:port` (the
    /// first has no credentials, the others the listing's when it has them).
    pub fn text_shape(&self, shape: usize) -> String {
        let (host, port) = (&self.host, self.port);
        let scheme = self.protocol.scheme();
        match (shape % 4, &self.username, &self.password) {
            (1, Some(user), Some(pass)) => format!("{host}:{port}:{user}:{pass}"),
            (2, Some(user), Some(pass)) => format!("{user}:{pass}@{host}:{port}"),
            (3, Some(user), Some(pass)) => format!("{scheme}://{user}:{pass}@{host}:{port}"),
            (3, _, _) => format!("{scheme}://{host}:{port}"),
            _ => format!("{host}:{port}"),
        }
    }

    /// The JSON object: host, port, protocol, issued_at_ms, and username, password,
    /// region, carrier, expires_at_ms when known.
    pub fn json(&self) -> Value {
        let mut object = Map::new();
        object.insert("host".into(), json!(self.host));
        object.insert("port".into(), json!(self.port));
        object.insert("protocol".into(), json!(self.protocol.scheme()));
        object.insert("issued_at_ms".into(), json!(self.issued_at_ms));
        let optional = [
            ("username", self.username.clone().map(Value::from)),
            ("password", self.password.clone().map(Value::from)),
            ("region", self.region.clone().map(Value::from)),
            ("carrier", self.carrier.clone().map(Value::from)),
            ("expires_at_ms", self.expires_at_ms.map(Value::from)),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                object.insert(key.into(), value);
            }
        }
        Value::Object(object)
    }
}

/// Text entries no reasonable parser accepts, cycled through when asked for malformed
/// entries. Each is wrong in a different way.
pub(super) const MALFORMED_TEXT: &[&str] = &[
    "not-a-proxy",
    "127.0.0.1:notaport",
    "127.0.0.1:70000",
    ":8080",
    "gopher://127.0.0.1:70",
    "127.0.0.1:8080:user-without-password",
    "127.0.0.1:0",
];

/// JSON entries no reasonable parser accepts.
pub(super) fn malformed_json() -> Vec<Value> {
    vec![
        json!({"host": "127.0.0.1", "protocol": "http"}),
        json!({"host": "127.0.0.1", "port": "eighty", "protocol": "http"}),
        json!({"host": "127.0.0.1", "port": 70000, "protocol": "http"}),
        json!({"host": "", "port": 8080, "protocol": "http"}),
        json!({"host": "127.0.0.1", "port": 8080, "protocol": "gopher"}),
        json!("127.0.0.1:8080"),
        json!(42),
    ]
}

/// Interleaves `malformed` bad entries among `good` ones: one after each good entry while
/// they last, the rest at the end, cycling through `pool`.
pub(super) fn interleave<T: Clone>(good: Vec<T>, malformed: usize, pool: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(good.len() + malformed);
    let mut bad = (0..malformed).map(|i| pool[i % pool.len()].clone());
    for entry in good {
        out.push(entry);
        if let Some(b) = bad.next() {
            out.push(b);
        }
    }
    out.extend(bad);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(creds: bool) -> Listing {
        Listing {
            host: "127.0.0.1".into(),
            port: 3128,
            protocol: ProxyKind::Socks5,
            username: creds.then(|| "u".into()),
            password: creds.then(|| "p".into()),
            region: Some("eu".into()),
            carrier: None,
            expires_at_ms: Some(1_000),
            issued_at_ms: 500,
            exit_ip: Ipv4Addr::new(127, 0, 0, 2),
        }
    }

    #[test]
    fn text_and_json_forms() {
        assert_eq!(sample(true).text_line(false), "127.0.0.1:3128:u:p");
        assert_eq!(sample(true).text_line(true), "socks5://127.0.0.1:3128:u:p");
        assert_eq!(sample(false).text_line(false), "127.0.0.1:3128");
        assert_eq!(
            sample(true).json(),
            json!({"host": "127.0.0.1", "port": 3128, "protocol": "socks5", "username": "u",
                   "password": "p", "region": "eu", "expires_at_ms": 1000, "issued_at_ms": 500})
        );
    }

    #[test]
    fn every_text_shape() {
        let shapes: Vec<String> = (0..4).map(|i| sample(true).text_shape(i)).collect();
        assert_eq!(
            shapes,
            [
                "127.0.0.1:3128",
                "127.0.0.1:3128:u:p",
                "u:p@127.0.0.1:3128",
                "socks5://u:p@127.0.0.1:3128"
            ]
        );
    }

    #[test]
    fn interleaves_bad_entries() {
        assert_eq!(interleave(vec![1, 2], 3, &[9]), [1, 9, 2, 9, 9]);
        assert_eq!(interleave(vec![1, 2, 3], 1, &[7, 8]), [1, 7, 2, 3]);
        assert_eq!(interleave(Vec::<i32>::new(), 0, &[7]), Vec::<i32>::new());
    }
}
