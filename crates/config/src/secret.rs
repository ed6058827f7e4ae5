//! [`SecretRef`]: how every secret in the file is given, and what it resolves to.
//!
//! A secret is never written in the file. It is referenced, always with the same inline
//! table of exactly one key:
//!
//! - `{ env = "VAR" }`: the value of an environment variable;
//! - `{ file = "secrets/x" }`: a file's content (relative to the configuration file; one
//!   trailing newline is not part of the secret);
//! - `{ hash = "sha256:<salt>:<hex>" }`: a salted hash, for secrets the service only has
//!   to verify (API tokens, gateway passwords, worker tokens).
//!
//! Resolution happens once per load: a reference that cannot be resolved fails the load
//! with its key and the *name* of the variable or file, never a value. Secrets that are
//! only verified are kept as salted hashes; their salt is derived from what the secret
//! belongs to, so every controller computes the same hash (and workers see the same
//! snapshot checksum from any of them).

use crate::env::Env;
use proxypool_core::{Secret, SecretHash};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

/// The shortest token or password, given in clear, that guards this service (client API
/// tokens, gateway passwords, worker and metrics tokens). Credentials the service sends to
/// others (a vendor's proxy password, a store password) are not ours to choose and have no
/// minimum.
pub const MIN_VERIFIED_LEN: usize = 16;

/// Where a secret comes from, as the file writes it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SecretSource {
    Env(String),
    File(String),
    Hash(SecretHash),
}

/// A secret reference and, once the load resolved it, the secret (or its hash).
#[derive(Clone)]
pub struct SecretRef {
    source: SecretSource,
    resolved: Resolved,
}

#[derive(Clone)]
enum Resolved {
    Pending,
    Plain(Secret),
    Hash(SecretHash),
}

impl SecretRef {
    /// A reference to an environment variable (not yet resolved).
    pub fn env(name: impl Into<String>) -> Self {
        SecretRef::from_source(SecretSource::Env(name.into()))
    }

    /// A reference to a file (not yet resolved).
    pub fn file(path: impl Into<String>) -> Self {
        SecretRef::from_source(SecretSource::File(path.into()))
    }

    /// A salted hash given as it is (already resolved: there is nothing to read).
    pub fn hash(hash: SecretHash) -> Self {
        SecretRef {
            resolved: Resolved::Hash(hash.clone()),
            source: SecretSource::Hash(hash),
        }
    }

    /// A secret held in memory: for components assembled in code (the in-process gateway's
    /// made-up token, tests). It is shown as an environment reference named `<generated>`.
    pub fn generated(secret: Secret) -> Self {
        SecretRef {
            source: SecretSource::Env("<generated>".into()),
            resolved: Resolved::Plain(secret),
        }
    }

    fn from_source(source: SecretSource) -> Self {
        SecretRef {
            source,
            resolved: Resolved::Pending,
        }
    }

    pub fn source(&self) -> &SecretSource {
        &self.source
    }

    /// The secret itself, once resolved (never for a `hash` reference).
    pub fn plain(&self) -> Option<&Secret> {
        match &self.resolved {
            Resolved::Plain(secret) => Some(secret),
            _ => None,
        }
    }

    /// The salted hash to verify against, once resolved.
    pub fn verifier(&self) -> Option<&SecretHash> {
        match &self.resolved {
            Resolved::Hash(hash) => Some(hash),
            _ => None,
        }
    }

    /// Reads the secret itself; a `hash` reference is refused (the service must send
    /// this secret, so a hash of it is of no use).
    pub(crate) fn resolve_plain(&mut self, base_dir: &Path, env: &Env) -> Result<(), String> {
        if let Resolved::Plain(_) = self.resolved {
            return Ok(());
        }
        let secret = match &self.source {
            SecretSource::Hash(_) => {
                return Err(
                    "the service has to send this secret, so it needs { env = ... } or { file = ... }, not a hash"
                        .into(),
                );
            }
            source => read(source, base_dir, env)?,
        };
        self.resolved = Resolved::Plain(secret);
        Ok(())
    }

    /// Resolves to a salted hash: a `hash` reference as given, a plain secret hashed with
    /// a salt derived from `owner` (e.g. `api_token:acme`). A secret given in clear that is
    /// shorter than [`MIN_VERIFIED_LEN`] characters is refused: it guards this service, so
    /// it must not be guessable.
    pub(crate) fn resolve_verifier(
        &mut self,
        owner: &str,
        base_dir: &Path,
        env: &Env,
    ) -> Result<(), String> {
        let hash = match (&self.source, &self.resolved) {
            (SecretSource::Hash(hash), _) => hash.clone(),
            (_, Resolved::Hash(hash)) => hash.clone(),
            (_, Resolved::Plain(secret)) => hash_of(secret, owner)?,
            (source, Resolved::Pending) => {
                let secret = read(source, base_dir, env)?;
                let length = secret.expose().chars().count();
                if length < MIN_VERIFIED_LEN {
                    return Err(format!(
                        "the secret it names is {length} characters long; secrets that guard this service need at least {MIN_VERIFIED_LEN}"
                    ));
                }
                hash_of(&secret, owner)?
            }
        };
        self.resolved = Resolved::Hash(hash);
        Ok(())
    }
}

fn read(source: &SecretSource, base_dir: &Path, env: &Env) -> Result<Secret, String> {
    match source {
        SecretSource::Env(name) => match env.get(name) {
            Some(value) if !value.is_empty() => Ok(Secret::new(value)),
            Some(_) => Err(format!("environment variable {name} is empty")),
            None => Err(format!("environment variable {name} is not set")),
        },
        SecretSource::File(file) => {
            let path = base_dir.join(file);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read secret file {}: {}", path.display(), e.kind()))?;
            // Files written with `echo` end in a newline that is not part of the secret.
            let value = text.trim_end_matches(['\r', '\n']);
            if value.is_empty() {
                return Err(format!("secret file {} is empty", path.display()));
            }
            Ok(Secret::new(value))
        }
        SecretSource::Hash(_) => Err("a hash cannot be read as a secret".into()),
    }
}

fn hash_of(secret: &Secret, owner: &str) -> Result<SecretHash, String> {
    SecretHash::derive(secret.expose(), &salt_for(owner)).map_err(|e| e.to_string())
}

/// A stable salt for the secret of `owner` (e.g. `client:acme`).
fn salt_for(owner: &str) -> String {
    // The digest is only salt material: its hex is alphanumeric, as SecretHash wants.
    let digest = SecretHash::derive(owner, "proxypoolsalt")
        .map(|h| h.as_str().rsplit(':').next().unwrap_or_default().to_owned())
        .unwrap_or_default();
    digest.chars().take(24).collect()
}

impl PartialEq for SecretRef {
    /// Two references are equal when they name the same source and resolved to the same
    /// thing (so a reload notices a rotated secret behind an unchanged variable name).
    fn eq(&self, other: &Self) -> bool {
        let same_value = match (&self.resolved, &other.resolved) {
            (Resolved::Pending, Resolved::Pending) => true,
            (Resolved::Plain(a), Resolved::Plain(b)) => a.expose() == b.expose(),
            (Resolved::Hash(a), Resolved::Hash(b)) => a == b,
            _ => false,
        };
        self.source == other.source && same_value
    }
}

impl fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Env(name) => write!(f, "env:{name}"),
            SecretSource::File(path) => write!(f, "file:{path}"),
            // The hash is not the secret, but it is all an offline guesser needs.
            SecretSource::Hash(_) => f.write_str("hash:<redacted>"),
        }
    }
}

impl fmt::Debug for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.source, f)
    }
}

impl Serialize for SecretRef {
    /// The reference as written (a hash is redacted); never the resolved value.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(1))?;
        match &self.source {
            SecretSource::Env(name) => map.serialize_entry("env", name)?,
            SecretSource::File(path) => map.serialize_entry("file", path)?,
            SecretSource::Hash(_) => map.serialize_entry("hash", "<redacted>")?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for SecretRef {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Table {
            env: Option<String>,
            file: Option<String>,
            hash: Option<SecretHash>,
        }
        let table = Table::deserialize(deserializer)?;
        match (table.env, table.file, table.hash) {
            (Some(name), None, None) if !name.is_empty() => Ok(SecretRef::env(name)),
            (None, Some(path), None) if !path.is_empty() => Ok(SecretRef::file(path)),
            (None, None, Some(hash)) => Ok(SecretRef::hash(hash)),
            _ => Err(serde::de::Error::custom(
                "a secret is referenced with exactly one of { env = \"VAR\" }, { file = \"PATH\" } or { hash = \"sha256:...\" }",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env::from_pairs([
            ("TOKEN", "s3cret-value-long-enough"),
            ("EMPTY", ""),
            ("SHORT", "fifteen-chars-x"),
        ])
    }

    #[test]
    fn plain_secrets_come_from_env_or_file_never_from_a_hash() {
        let dir = std::env::temp_dir().join(format!("pp-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("pw"), "from-file\n").unwrap();

        let mut by_env = SecretRef::env("TOKEN");
        by_env.resolve_plain(&dir, &env()).unwrap();
        assert_eq!(by_env.plain().unwrap().expose(), "s3cret-value-long-enough");

        let mut by_file = SecretRef::file("pw");
        by_file.resolve_plain(&dir, &env()).unwrap();
        assert_eq!(by_file.plain().unwrap().expose(), "from-file");

        let mut missing = SecretRef::env("NOPE");
        let message = missing.resolve_plain(&dir, &env()).unwrap_err();
        assert!(message.contains("NOPE"), "{message}");
        assert!(SecretRef::env("EMPTY").resolve_plain(&dir, &env()).is_err());

        let hash = SecretHash::derive("x", "salt").unwrap();
        let mut hashed = SecretRef::hash(hash);
        assert!(hashed.resolve_plain(&dir, &env()).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn verified_secrets_shorter_than_sixteen_characters_are_refused() {
        let dir = Path::new(".");
        let mut short = SecretRef::env("SHORT");
        let message = short
            .resolve_verifier("api_token:a", dir, &env())
            .unwrap_err();
        assert!(
            message.contains("15 characters") && message.contains("16"),
            "{message}"
        );
        assert!(
            !message.contains("fifteen"),
            "the value is never shown: {message}"
        );
        // A secret the service sends is not ours to choose: no minimum.
        let mut sent = SecretRef::env("SHORT");
        sent.resolve_plain(dir, &env()).unwrap();
        // A hash cannot be measured, and is taken as given.
        let mut hashed = SecretRef::hash(SecretHash::derive("x", "salt").unwrap());
        hashed.resolve_verifier("api_token:a", dir, &env()).unwrap();
    }

    #[test]
    fn verifiers_are_salted_by_owner_and_stable() {
        let dir = Path::new(".");
        let mut a = SecretRef::env("TOKEN");
        a.resolve_verifier("api_token:a", dir, &env()).unwrap();
        let mut again = SecretRef::env("TOKEN");
        again.resolve_verifier("api_token:a", dir, &env()).unwrap();
        let mut b = SecretRef::env("TOKEN");
        b.resolve_verifier("api_token:b", dir, &env()).unwrap();
        assert!(a.verifier().unwrap().verify("s3cret-value-long-enough"));
        assert_eq!(a, again);
        assert_ne!(a.verifier(), b.verifier());
    }

    #[test]
    fn one_key_exactly_and_nothing_secret_in_debug_or_output() {
        let parse =
            |text: &str| toml::from_str::<std::collections::BTreeMap<String, SecretRef>>(text);
        assert!(parse("s = { env = \"A\" }").is_ok());
        assert!(parse("s = { env = \"A\", file = \"b\" }").is_err());
        assert!(parse("s = { value = \"x\" }").is_err());
        assert!(parse("s = \"plain\"").is_err());

        let mut resolved = SecretRef::env("TOKEN");
        resolved.resolve_plain(Path::new("."), &env()).unwrap();
        assert!(!format!("{resolved:?}").contains("s3cret"));
        let json = serde_json::to_string(&resolved).unwrap();
        assert_eq!(json, r#"{"env":"TOKEN"}"#);
        let hashed = SecretRef::hash(SecretHash::derive("x", "salt").unwrap());
        assert_eq!(
            serde_json::to_string(&hashed).unwrap(),
            r#"{"hash":"<redacted>"}"#
        );
    }
}
