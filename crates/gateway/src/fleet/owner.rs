//! STUB (H3 replaces): which member owns a key.

#[derive(Debug, Default)]
pub(crate) struct Owners {}

impl Owners {
    pub(crate) fn new() -> Self {
        Owners {}
    }
}
