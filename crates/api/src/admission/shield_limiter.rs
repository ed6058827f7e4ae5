//! [`Shield`]: the per-IP limiter the shield middleware (`admission::shield`) consults,
//! and the thread that keeps its memory bounded; the API state holds one.

use proxypool_throttle::{Clock, Decision, PolicyLimiter, Sweeper};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// What the shield needs from a limiter: one global per-IP check.
trait IpCheck: Send + Sync {
    fn check_ip(&self, ip: IpAddr) -> Decision;
}

impl<C: Clock + 'static> IpCheck for PolicyLimiter<C> {
    fn check_ip(&self, ip: IpAddr) -> Decision {
        self.check_global(ip)
    }
}

/// The shield: a limiter and, when the API built it, the thread that keeps its memory
/// bounded by evicting idle addresses.
#[derive(Clone)]
pub struct Shield {
    check: Arc<dyn IpCheck>,
    _sweeper: Option<Arc<Sweeper>>,
}

impl fmt::Debug for Shield {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shield")
            .field("sweeper", &self._sweeper.is_some())
            .finish()
    }
}

impl Shield {
    /// Builds the limiter from settings and starts its sweeper thread.
    pub fn from_settings(
        settings: &crate::config::ShieldSettings,
    ) -> Result<Shield, crate::config::ApiConfigError> {
        let limiter = Arc::new(
            PolicyLimiter::builder(settings.engine.clone(), settings.policy.clone()).build()?,
        );
        let sweeper = Sweeper::spawn(limiter.clone(), settings.sweep_interval, 1024)
            .map_err(|error| crate::config::ApiConfigError::Sweeper(error.to_string()))?;
        Ok(Shield {
            check: limiter,
            _sweeper: Some(Arc::new(sweeper)),
        })
    }

    /// Uses a limiter the caller built (and sweeps), e.g. one on a manual clock in tests.
    pub fn from_limiter<C: Clock + 'static>(limiter: Arc<PolicyLimiter<C>>) -> Shield {
        Shield {
            check: limiter,
            _sweeper: None,
        }
    }

    pub(crate) fn check(&self, ip: IpAddr) -> Decision {
        self.check.check_ip(ip)
    }
}
