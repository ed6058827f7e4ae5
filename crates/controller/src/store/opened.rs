//! What opening a store gives: [`OpenedStore`], or why it failed, [`StoreOpenError`].

use crate::leadership::Leadership;
use proxypool_core::ActivityPool;
use std::sync::Arc;

/// The store and the leadership that goes with it.
#[derive(Debug, Clone)]
pub struct OpenedStore {
    pub pool: Arc<dyn ActivityPool>,
    pub leadership: Arc<dyn Leadership>,
}

/// Why the store could not be opened. The message never carries a password or a URL's
/// credentials (the configuration refuses those anyway).
#[derive(Debug, thiserror::Error)]
pub enum StoreOpenError {
    #[error("cannot open the store: {0}")]
    Open(String),
}
