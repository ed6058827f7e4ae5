//! `proxypool hash-secret`: reads a secret from standard input and prints the
//! `{ hash = "sha256:<salt>:<hex>" }` reference that verifies it, so a file can hold the
//! hash of an API token, a gateway password or a worker or metrics token instead of the
//! secret or a path to it.
//!
//! The secret is read whole from standard input (never from an argument, which other users
//! of the machine could see in the process list); one trailing newline is not part of it,
//! as with `{ file = ... }`. In a terminal a prompt on standard error asks for it and one
//! line is read, so Enter ends it; from a pipe nothing is printed but the reference, so
//! scripts capture just that. The line is not hidden while typed: turning the terminal's
//! echo off needs a dependency this binary does not otherwise carry, and a process killed
//! in that state would leave the terminal without echo. It must be at least as long as the configuration demands of a
//! secret given in clear (`proxypool_config::MIN_VERIFIED_LEN`): a hash hides how short a
//! secret is, so this is the last place that can refuse a guessable one. The salt is fresh
//! from the operating system's random source each time.

use crate::failure::Failure;
use proxypool_config::MIN_VERIFIED_LEN;
use proxypool_core::SecretHash;
use std::io::{BufRead, IsTerminal, Read, Write};

/// Characters of salt (of `[a-zA-Z2-9]`, as `SecretHash` wants alphanumerics).
const SALT_LEN: usize = 24;

pub(crate) fn run() -> Result<(), Failure> {
    let stdin = std::io::stdin();
    let mut input = String::new();
    let read = if stdin.is_terminal() {
        let mut stderr = std::io::stderr();
        let _ = write!(
            stderr,
            "The secret to hash (at least {MIN_VERIFIED_LEN} characters; shown as typed), then Enter: "
        );
        let _ = stderr.flush();
        stdin.lock().read_line(&mut input)
    } else {
        stdin.lock().read_to_string(&mut input)
    };
    read.map_err(|e| Failure::config(format!("reading the secret from standard input: {e}")))?;
    println!("{}", reference(&input)?);
    Ok(())
}

/// The `{ hash = ... }` reference for the secret `input` holds (also `init`'s, for the
/// secrets it generates).
pub(crate) fn reference(input: &str) -> Result<String, Failure> {
    let secret = input
        .strip_suffix('\n')
        .map_or(input, |line| line.strip_suffix('\r').unwrap_or(line));
    let length = secret.chars().count();
    if length < MIN_VERIFIED_LEN {
        return Err(Failure::config(format!(
            "the secret on standard input is {length} characters long; secrets that guard this service need at least {MIN_VERIFIED_LEN}"
        )));
    }
    let hash = SecretHash::derive(secret, &crate::random::token(SALT_LEN))
        .map_err(|e| Failure::runtime(format!("hashing the secret: {e}")))?;
    Ok(format!("{{ hash = \"{}\" }}", hash.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_in(reference: &str) -> SecretHash {
        let quoted = reference
            .strip_prefix("{ hash = \"")
            .and_then(|rest| rest.strip_suffix("\" }"))
            .unwrap_or_else(|| panic!("not a hash reference: {reference}"));
        SecretHash::parse(quoted).unwrap()
    }

    #[test]
    fn the_reference_verifies_the_secret_without_its_newline_and_nothing_else() {
        let secret = "a-long-enough-api-token-0123456789";
        let hash = hash_in(&reference(&format!("{secret}\n")).unwrap());
        assert!(hash.verify(secret));
        assert!(!hash.verify(&format!("{secret}\n")));
        assert!(!hash.verify("a-long-enough-api-token-012345678"));
        assert!(hash_in(&reference(&format!("{secret}\r\n")).unwrap()).verify(secret));
    }

    #[test]
    fn every_call_salts_afresh() {
        let secret = "a-long-enough-api-token-0123456789";
        assert_ne!(reference(secret).unwrap(), reference(secret).unwrap());
    }

    #[test]
    fn a_short_secret_is_refused_by_its_length_never_echoed() {
        let failure = reference("short-secret\n").unwrap_err();
        assert_eq!(failure.code, crate::failure::code::CONFIG);
        assert!(
            failure.message.contains("12 characters"),
            "{}",
            failure.message
        );
        assert!(
            !failure.message.contains("short-secret"),
            "{}",
            failure.message
        );
        assert!(reference("").is_err());
    }
}
