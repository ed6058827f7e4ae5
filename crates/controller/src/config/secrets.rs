//! Resolving secret references (`*_env`, `*_file`, `*_hash`) at load time.
//!
//! A reference that cannot be resolved fails the load with the key and the *name* of the
//! variable or file, never a value. Tokens and gateway passwords are kept only as salted
//! hashes; the salt is derived from what the secret belongs to, so every controller
//! computes the same hash (and workers see the same snapshot checksum from any of them).

use super::env::Env;
use proxypool_core::{Secret, SecretHash};
use std::path::Path;

/// Reads exactly one of `env` / `file`; `Ok(None)` when neither is set.
pub(crate) fn resolve(
    env_name: Option<&str>,
    file: Option<&str>,
    base_dir: &Path,
    env: &Env,
) -> Result<Option<Secret>, String> {
    match (env_name, file) {
        (Some(_), Some(_)) => Err("set only one of the _env and _file references".into()),
        (None, None) => Ok(None),
        (Some(name), None) => match env.get(name) {
            Some(value) if !value.is_empty() => Ok(Some(Secret::new(value))),
            Some(_) => Err(format!("environment variable {name} is empty")),
            None => Err(format!("environment variable {name} is not set")),
        },
        (None, Some(file)) => {
            let path = base_dir.join(file);
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read secret file {}: {}", path.display(), e.kind()))?;
            // Files written with `echo` end in a newline that is not part of the secret.
            let value = text.trim_end_matches(['\r', '\n']);
            if value.is_empty() {
                return Err(format!("secret file {} is empty", path.display()));
            }
            Ok(Some(Secret::new(value)))
        }
    }
}

/// A stable salt for the secret of `owner` (e.g. `client:acme`).
pub(crate) fn salt_for(owner: &str) -> String {
    // The digest is only used as salt material: the hex is alphanumeric as SecretHash wants.
    let digest = SecretHash::derive(owner, "proxypoolsalt")
        .map(|h| h.as_str().rsplit(':').next().unwrap_or_default().to_owned())
        .unwrap_or_default();
    digest.chars().take(24).collect()
}

/// One of a hash or a reference to the plain secret, as a hash.
pub(crate) fn resolve_hash(
    hash: Option<&SecretHash>,
    env_name: Option<&str>,
    file: Option<&str>,
    owner: &str,
    base_dir: &Path,
    env: &Env,
) -> Result<Option<SecretHash>, String> {
    let plain = resolve(env_name, file, base_dir, env)?;
    match (hash, plain) {
        (Some(_), Some(_)) => Err("set only one of _hash, _env and _file".into()),
        (Some(hash), None) => Ok(Some(hash.clone())),
        (None, Some(secret)) => SecretHash::derive(secret.expose(), &salt_for(owner))
            .map(Some)
            .map_err(|e| e.to_string()),
        (None, None) => Ok(None),
    }
}
