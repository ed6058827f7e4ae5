//! Reading an HTTP/1.x response head without reading past it, with a size cap.
//!
//! After a `CONNECT` response the next byte belongs to the tunnel (a server that speaks
//! first, like SSH or SMTP, may send it in the same packet), so the reader must stop
//! exactly at the blank line. It never reads more than the bytes still needed to complete
//! a possible `\r\n\r\n`, which keeps it exact without a byte-per-syscall loop.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::ProtoError;

/// The largest response head accepted (status line + headers + blank line).
pub const MAX_RESPONSE_HEAD: usize = 16 * 1024;

const TERMINATOR: &[u8; 4] = b"\r\n\r\n";

/// A parsed response head: the status and the raw header lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// Header `(name, value)` pairs in order, values trimmed.
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads and parses one response head of at most `cap` bytes from `stream`, leaving the
/// stream positioned right after the blank line.
pub async fn read_response_head<S>(stream: &mut S, cap: usize) -> Result<ResponseHead, ProtoError>
where
    S: AsyncRead + Unpin,
{
    let mut buf = Vec::with_capacity(256);
    loop {
        let need = TERMINATOR.len() - matched_suffix(&buf);
        if need == 0 {
            break;
        }
        if buf.len() + need > cap {
            return Err(ProtoError::malformed(
                "http",
                format!("response head larger than {cap} bytes"),
            ));
        }
        let start = buf.len();
        buf.resize(start + need, 0);
        let n = stream.read(&mut buf[start..]).await?;
        buf.truncate(start + n);
        if n == 0 {
            return Err(ProtoError::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed inside the response head",
            )));
        }
    }
    parse_head(&buf[..buf.len() - TERMINATOR.len()])
}

/// How many bytes at the end of `buf` match the start of the terminator (4 = complete).
fn matched_suffix(buf: &[u8]) -> usize {
    (1..=TERMINATOR.len())
        .rev()
        .find(|&k| buf.ends_with(&TERMINATOR[..k]))
        .unwrap_or(0)
}

fn parse_head(raw: &[u8]) -> Result<ResponseHead, ProtoError> {
    let text = std::str::from_utf8(raw)
        .map_err(|_| ProtoError::malformed("http", "response head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = parse_status_line(status_line)?;
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| ProtoError::malformed("http", "header line without ':'"))?;
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(ProtoError::malformed("http", "invalid header name"));
        }
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(ResponseHead { status, headers })
}

/// `HTTP/1.x SSS [reason]`.
fn parse_status_line(line: &str) -> Result<u16, ProtoError> {
    let bad = || ProtoError::malformed("http", "invalid status line");
    let rest = line.strip_prefix("HTTP/1.").ok_or_else(bad)?;
    let mut parts = rest.splitn(3, ' ');
    let minor = parts.next().ok_or_else(bad)?;
    if minor.len() != 1 || !minor.as_bytes()[0].is_ascii_digit() {
        return Err(bad());
    }
    let code = parts.next().ok_or_else(bad)?;
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let status: u16 = code.parse().map_err(|_| bad())?;
    if !(100..=599).contains(&status) {
        return Err(bad());
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    async fn head_of(bytes: &[u8], cap: usize) -> (Result<ResponseHead, ProtoError>, Vec<u8>) {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        server.write_all(bytes).await.unwrap();
        drop(server);
        let result = read_response_head(&mut client, cap).await;
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        (result, rest)
    }

    #[tokio::test]
    async fn stops_exactly_at_the_blank_line() {
        let (head, rest) = head_of(
            b"HTTP/1.1 200 Connection established\r\nVia: x\r\nX-A:  b \r\n\r\nSSH-2.0-banner\r\n\r\n",
            MAX_RESPONSE_HEAD,
        )
        .await;
        let head = head.unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.header("x-a"), Some("b"));
        assert_eq!(head.header("via"), Some("x"));
        assert_eq!(rest, b"SSH-2.0-banner\r\n\r\n");

        let (head, rest) = head_of(b"HTTP/1.0 407\r\n\r\n", MAX_RESPONSE_HEAD).await;
        assert_eq!(head.unwrap().status, 407);
        assert!(rest.is_empty());
    }

    #[tokio::test]
    async fn caps_the_head() {
        let mut big = b"HTTP/1.1 200 OK\r\n".to_vec();
        big.extend_from_slice(format!("X: {}\r\n\r\n", "a".repeat(200)).as_bytes());
        let (result, _) = head_of(&big, 100).await;
        assert!(
            matches!(result, Err(ProtoError::Malformed { .. })),
            "{result:?}"
        );
        let (result, _) = head_of(&big, big.len()).await;
        assert!(result.is_ok());
    }

    #[tokio::test]
    async fn rejects_malformed_heads() {
        for bytes in [
            &b"SSH-2.0-OpenSSH\r\n\r\n"[..],
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/2 200 OK\r\n\r\n",
            b"HTTP/1.1 099 x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nbad name: v\r\n\r\n",
            b"HTTP/1.1 200 \xff\r\n\r\n",
        ] {
            let (result, _) = head_of(bytes, MAX_RESPONSE_HEAD).await;
            assert!(
                matches!(result, Err(ProtoError::Malformed { .. })),
                "{bytes:?}: {result:?}"
            );
        }
        let (result, _) = head_of(b"HTTP/1.1 200 OK\r\n", MAX_RESPONSE_HEAD).await;
        assert!(matches!(result, Err(ProtoError::Io(_))), "{result:?}");
    }

    #[test]
    fn suffix_matching() {
        assert_eq!(matched_suffix(b""), 0);
        assert_eq!(matched_suffix(b"ab\r"), 1);
        assert_eq!(matched_suffix(b"ab\r\n"), 2);
        assert_eq!(matched_suffix(b"ab\r\n\r"), 3);
        assert_eq!(matched_suffix(b"ab\r\n\r\n"), 4);
        assert_eq!(matched_suffix(b"ab\n\r\n"), 2);
    }
}
