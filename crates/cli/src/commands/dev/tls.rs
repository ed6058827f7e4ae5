//! `dev`'s TLS client listener: a self-signed certificate for `localhost` and `127.0.0.1`
//! in the data directory (made once, kept across runs so a client that trusts it keeps
//! trusting it), and the readiness probe through the listener.

use crate::failure::Failure;
use proxypool_edge::{ClientTls, ClientTlsFiles};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The listener's certificate (also what a client trusts: it is self-signed) and key.
#[derive(Debug, Clone)]
pub(super) struct ListenerCert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The certificate files under `dir`, made when either is missing.
pub(super) fn ensure(dir: &Path) -> Result<ListenerCert, Failure> {
    let files = ListenerCert {
        cert: absolute(dir)?.join("gateway-tls.pem"),
        key: absolute(dir)?.join("gateway-tls.key"),
    };
    if files.cert.is_file() && files.key.is_file() {
        return Ok(files);
    }
    let names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    let made = rcgen::generate_simple_self_signed(names)
        .map_err(|e| Failure::runtime(format!("dev TLS certificate: {e}")))?;
    write(&files.key, &made.signing_key.serialize_pem(), true)?;
    write(&files.cert, &made.cert.pem(), false)?;
    Ok(files)
}

fn absolute(dir: &Path) -> Result<PathBuf, Failure> {
    std::path::absolute(dir)
        .map_err(|e| Failure::runtime(format!("cannot resolve {}: {e}", dir.display())))
}

fn write(path: &Path, text: &str, secret: bool) -> Result<(), Failure> {
    let fail = |e: std::io::Error| Failure::runtime(format!("writing {}: {e}", path.display()));
    std::fs::write(path, text).map_err(fail)?;
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
    }
    #[cfg(not(unix))]
    let _ = secret;
    Ok(())
}

/// A GET of `origin` through the TLS listener at `listener`, trusting `cert`: whether the
/// origin answered 200.
pub(super) async fn probe(
    listener: SocketAddr,
    cert: &Path,
    auth: (&str, &str),
    origin: SocketAddr,
) -> bool {
    let Ok(tls) = ClientTls::load(&ClientTlsFiles {
        ca: Some(cert.to_owned()),
        cert: None,
        key: None,
    }) else {
        return false;
    };
    let Ok(tcp) = tokio::net::TcpStream::connect(listener).await else {
        return false;
    };
    let Ok(mut stream) = tls.connect("localhost", tcp).await else {
        return false;
    };
    let request = format!(
        "GET http://{origin}/ready HTTP/1.1\r\nHost: {origin}\r\nProxy-Authorization: {}\r\n\
         Connection: close\r\n\r\n",
        proxypool_proto::http_connect::basic_auth_value(auth.0, auth.1)
    );
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    answer.starts_with(b"HTTP/1.1 200 ")
}
