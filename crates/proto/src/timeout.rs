//! A deadline around a protocol step.
//!
//! The protocol functions never time out by themselves because only the caller knows the
//! budget (the gateway's handshake timeout, the checker's per-check timeout, a test's).

use std::future::Future;
use std::time::Duration;

use crate::ProtoError;

/// Runs `fut`, turning a passed deadline into [`ProtoError::Timeout`].
///
/// ```no_run
/// # async fn f(mut s: tokio::net::TcpStream) -> Result<(), proxypool_proto::ProtoError> {
/// use std::time::Duration;
/// use proxypool_proto::{http_connect, with_timeout};
/// with_timeout(Duration::from_secs(5), http_connect::connect(&mut s, "example.com:443", None)).await
/// # }
/// ```
pub async fn with_timeout<T, F>(deadline: Duration, fut: F) -> Result<T, ProtoError>
where
    F: Future<Output = Result<T, ProtoError>>,
{
    match tokio::time::timeout(deadline, fut).await {
        Ok(result) => result,
        Err(_) => Err(ProtoError::Timeout(deadline)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn passes_results_through_and_times_out() {
        let ok = with_timeout(Duration::from_secs(1), async { Ok::<_, ProtoError>(7) }).await;
        assert_eq!(ok.unwrap(), 7);

        let never = std::future::pending::<Result<(), ProtoError>>();
        let err = with_timeout(Duration::from_millis(50), never)
            .await
            .unwrap_err();
        assert!(matches!(err, ProtoError::Timeout(d) if d == Duration::from_millis(50)));
        assert!(err.is_timeout());
    }
}
