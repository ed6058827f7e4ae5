//! The snapshot protocol's integration tests, one module per concern.

mod content;
