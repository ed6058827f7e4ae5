//! The controller's view of the configuration: the typed settings of `proxypool-config`,
//! which owns the file (parsing, overrides, secrets, validation). Re-exported so the
//! controller's modules and its users name one set of types.

pub use proxypool_config::*;
