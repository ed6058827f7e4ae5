//! Session ids: 32 hex digits, different for every registration of every process (also
//! the usage table's instance id, one per process).

/// 32 hex digits from the operating system's random source (`proxypool_core::random`),
/// different for every registration of every process (also the usage table's instance id:
/// one per process).
///
/// # Panics
///
/// When the operating system has no random source to give: a gateway that cannot name its
/// session apart from another's must not register at all.
pub(crate) fn new_session_id() -> String {
    proxypool_core::random::hex(16).expect("the operating system's random source")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_unique_and_valid() {
        let a = new_session_id();
        let b = new_session_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        proxypool_core::runtime::validate_session_id(&a).unwrap();
    }
}
