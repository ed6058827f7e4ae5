//! What the server's end of a loopback TCP connection still holds unread, from the kernel's
//! socket table (`/proc/net/tcp`, `/proc/net/tcp6`). A listener test that must know the
//! server has read what its client sent (half a request head, say) before it goes on waits
//! for the server end's receive queue to empty ([`server_has_read`]) instead of sleeping:
//! nothing the client can see says so, since the server answers nothing yet. And which of
//! a flood's connections the server has closed ([`closed_by_server`]).

use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;

/// How the socket table writes an address: the address's 32-bit words in the kernel's
/// (little-endian) byte order as hex, then the port as hex.
fn table_form(addr: SocketAddr) -> String {
    let words: Vec<String> = match addr {
        SocketAddr::V4(v4) => vec![format!("{:08X}", u32::from_le_bytes(v4.ip().octets()))],
        SocketAddr::V6(v6) => v6
            .ip()
            .octets()
            .chunks(4)
            .map(|word| {
                format!(
                    "{:08X}",
                    u32::from_le_bytes([word[0], word[1], word[2], word[3]])
                )
            })
            .collect(),
    };
    format!("{}:{:04X}", words.concat(), addr.port())
}

/// Bytes the server's end of `client`'s connection has received and not read yet; `None`
/// when the kernel lists no such socket (the server closed it, or not Linux).
pub fn unread_by_server(client: &TcpStream) -> Option<usize> {
    let (server, local) = (client.peer_addr().ok()?, client.local_addr().ok()?);
    let table = if server.is_ipv4() {
        "/proc/net/tcp"
    } else {
        "/proc/net/tcp6"
    };
    let (server, local) = (table_form(server), table_form(local));
    let text = std::fs::read_to_string(table).ok()?;
    text.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&server.as_str()) || fields.get(2) != Some(&local.as_str()) {
            return None;
        }
        let (_, unread) = fields.get(4)?.split_once(':')?;
        usize::from_str_radix(unread, 16).ok()
    })
}

/// Waits until the server has read everything `client` sent so far (within `within`);
/// panics when it has not, or when the server's end is gone.
pub async fn server_has_read(client: &TcpStream, within: Duration) {
    crate::wait::eventually_async("the server to read what was sent", within, async || {
        let unread = unread_by_server(client).expect("the server's end of the connection");
        (unread == 0).then_some(())
    })
    .await;
}

/// How many of `streams` the server has closed by now (end of file, or a reset); one with
/// bytes waiting counts as open (the bytes are read and dropped).
pub fn closed_by_server(streams: &[TcpStream]) -> usize {
    let mut scratch = [0u8; 1024];
    streams
        .iter()
        .filter(|stream| {
            loop {
                match stream.try_read(&mut scratch) {
                    Ok(0) => break true,
                    Ok(_) => continue,
                    Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break false,
                    Err(_) => break true,
                }
            }
        })
        .count()
}

/// Waits until the server has closed at least `at_least` of `streams` (within `within`);
/// panics naming `what` otherwise.
pub async fn server_closed(what: &str, streams: &[TcpStream], at_least: usize, within: Duration) {
    crate::wait::eventually_async(what, within, async || {
        (closed_by_server(streams) >= at_least).then_some(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn addresses_are_written_as_the_kernel_writes_them() {
        assert_eq!(
            table_form("127.0.0.2:8080".parse().unwrap()),
            "0200007F:1F90"
        );
        assert_eq!(
            table_form("[::1]:80".parse().unwrap()),
            "00000000000000000000000001000000:0050"
        );
    }

    #[test]
    fn the_servers_unread_bytes_are_seen_until_it_reads_them() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let mut client = TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let (mut server, _) = listener.accept().await.unwrap();
            client.write_all(b"hello").await.unwrap();
            let arrived = async || (unread_by_server(&client) == Some(5)).then_some(());
            crate::wait::eventually_async("the bytes to arrive", Duration::from_secs(5), arrived)
                .await;
            let mut read = [0u8; 5];
            server.read_exact(&mut read).await.unwrap();
            server_has_read(&client, Duration::from_secs(5)).await;
        });
    }
}
