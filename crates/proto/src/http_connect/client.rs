//! Client side: open a tunnel through an HTTP proxy with `CONNECT`.

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use super::{MAX_RESPONSE_HEAD, basic_auth_value, read_response_head};
use crate::{ProtoError, TargetAddr};

/// Sends `CONNECT authority HTTP/1.1` (with `Proxy-Authorization: Basic` when `basic` is
/// given) and reads the response head (at most [`MAX_RESPONSE_HEAD`] bytes).
///
/// On a 2xx answer the stream is positioned at the first tunnel byte. Any other status is
/// [`ProtoError::Rejected`] (407 included; [`ProtoError::is_auth_rejected`] tells it
/// apart); the response body, if any, is left unread and the caller drops the connection.
/// `authority` must be `host:port` (IPv6 bracketed); anything else, or a username with
/// `:` (Basic cannot carry it), is [`ProtoError::Malformed`] before a byte is sent.
/// No timeout: see [`crate::with_timeout`].
pub async fn connect<S>(
    stream: &mut S,
    authority: &str,
    basic: Option<(&str, &str)>,
) -> Result<(), ProtoError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // Parsing rejects CR/LF and spaces, so the authority cannot smuggle header lines.
    let target: TargetAddr = authority.parse()?;
    let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some((user, pass)) = basic {
        if user.contains(':') {
            return Err(ProtoError::malformed(
                "http",
                "Basic usernames cannot contain ':'",
            ));
        }
        request.push_str("Proxy-Authorization: ");
        request.push_str(&basic_auth_value(user, pass));
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;

    let head = read_response_head(stream, MAX_RESPONSE_HEAD).await?;
    if (200..300).contains(&head.status) {
        Ok(())
    } else {
        Err(ProtoError::Rejected {
            status: head.status,
        })
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, duplex};

    use super::*;
    use crate::http_connect::parse_basic_auth;

    /// Runs `connect` against a scripted proxy that answers `response` and returns what
    /// the client sent, the result and the bytes the client could still read.
    async fn against(
        authority: &str,
        basic: Option<(&str, &str)>,
        response: &[u8],
    ) -> (String, Result<(), ProtoError>, Vec<u8>) {
        let (mut client, mut proxy) = duplex(64 * 1024);
        let proxy_side = async {
            let head = read_request_head(&mut proxy).await;
            if !head.is_empty() {
                proxy.write_all(response).await.unwrap();
            }
            drop(proxy);
            head
        };
        let client_side = async {
            let result = connect(&mut client, authority, basic).await;
            // Let the scripted proxy see EOF when nothing was sent.
            client.shutdown().await.unwrap();
            let mut rest = Vec::new();
            client.read_to_end(&mut rest).await.unwrap();
            (result, rest)
        };
        let (head, (result, rest)) = tokio::join!(proxy_side, client_side);
        (head, result, rest)
    }

    async fn read_request_head(proxy: &mut tokio::io::DuplexStream) -> String {
        let mut buf = Vec::new();
        let mut byte = [0u8; 1];
        while !buf.ends_with(b"\r\n\r\n") {
            if proxy.read(&mut byte).await.unwrap() == 0 {
                break;
            }
            buf.push(byte[0]);
        }
        String::from_utf8(buf).unwrap()
    }

    #[tokio::test]
    async fn tunnels_with_basic_auth() {
        let (sent, result, rest) = against(
            "example.com:443",
            Some(("alice", "s3cr:et")),
            b"HTTP/1.1 200 Connection established\r\n\r\nhello",
        )
        .await;
        result.unwrap();
        assert_eq!(rest, b"hello");
        let mut lines = sent.split("\r\n");
        assert_eq!(lines.next(), Some("CONNECT example.com:443 HTTP/1.1"));
        assert_eq!(lines.next(), Some("Host: example.com:443"));
        let auth = lines
            .next()
            .unwrap()
            .strip_prefix("Proxy-Authorization: ")
            .unwrap();
        assert_eq!(
            parse_basic_auth(auth).unwrap(),
            ("alice".into(), "s3cr:et".into())
        );
    }

    #[tokio::test]
    async fn tunnels_without_auth_to_ipv6() {
        let (sent, result, _) = against("[::1]:8443", None, b"HTTP/1.0 200 OK\r\n\r\n").await;
        result.unwrap();
        assert_eq!(
            sent,
            "CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n"
        );
    }

    #[tokio::test]
    async fn non_2xx_is_rejected_with_its_status() {
        let (_, result, _) = against(
            "example.com:443",
            Some(("alice", "wrong")),
            b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n",
        )
        .await;
        let err = result.unwrap_err();
        assert!(matches!(err, ProtoError::Rejected { status: 407 }), "{err}");
        assert!(err.is_auth_rejected());

        let (_, result, _) =
            against("example.com:443", None, b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        let err = result.unwrap_err();
        assert!(matches!(err, ProtoError::Rejected { status: 502 }), "{err}");
        assert!(!err.is_auth_rejected());
    }

    #[tokio::test]
    async fn malformed_responses_and_hangups() {
        let (_, result, _) = against("example.com:443", None, b"SSH-2.0-x\r\n\r\n").await;
        assert!(
            matches!(result, Err(ProtoError::Malformed { .. })),
            "{result:?}"
        );

        let oversized = format!(
            "HTTP/1.1 200 OK\r\nX: {}\r\n\r\n",
            "a".repeat(MAX_RESPONSE_HEAD)
        );
        let (_, result, _) = against("example.com:443", None, oversized.as_bytes()).await;
        assert!(
            matches!(result, Err(ProtoError::Malformed { .. })),
            "{result:?}"
        );

        let (_, result, _) = against("example.com:443", None, b"HTTP/1.1 200").await;
        assert!(matches!(result, Err(ProtoError::Io(_))), "{result:?}");
    }

    #[tokio::test]
    async fn bad_arguments_send_nothing() {
        for (authority, basic) in [
            ("example.com", None),
            ("example.com:443\r\nX-Evil: 1", None),
            ("::1:443", None),
            ("example.com:443", Some(("a:b", "p"))),
        ] {
            let (sent, result, _) = against(authority, basic, b"HTTP/1.1 200 OK\r\n\r\n").await;
            assert!(
                matches!(result, Err(ProtoError::Malformed { .. })),
                "{authority}: {result:?}"
            );
            assert!(sent.is_empty(), "{authority}: sent {sent:?}");
        }
    }
}
