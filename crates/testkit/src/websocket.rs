//! A minimal client-side WebSocket (RFC 6455) over a blocking `TcpStream`: enough to speak
//! the Chrome DevTools protocol to a local browser (`browser`). Text frames out (masked,
//! as a client must), text frames in (fragmented ones reassembled), pings answered, close
//! reported. No TLS, no extensions: the browser listens on loopback.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The largest message accepted (a full-page screenshot in base64 fits easily).
const MAX_MESSAGE: usize = 64 << 20;

#[derive(Debug)]
pub(crate) struct WebSocket {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    mask_seed: u32,
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

impl WebSocket {
    /// Connects to `ws://host:port/path` and completes the opening handshake.
    pub(crate) fn connect(url: &str, timeout: Duration) -> io::Result<WebSocket> {
        let rest = url
            .strip_prefix("ws://")
            .ok_or_else(|| invalid("only ws:// URLs"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let stream = TcpStream::connect(authority)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        let mut writer = stream.try_clone()?;
        let nonce = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let key = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            nonce.to_le_bytes(),
        );
        write!(
            writer,
            "GET /{path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )?;
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status)?;
        if !status.starts_with("HTTP/1.1 101") {
            return Err(invalid(&format!("handshake refused: {}", status.trim())));
        }
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Err(invalid("connection closed during the handshake"));
            }
            if line == "\r\n" {
                break;
            }
        }
        Ok(WebSocket {
            reader,
            writer,
            mask_seed: nonce as u32 | 1,
        })
    }

    /// Sends one text message.
    pub(crate) fn send_text(&mut self, text: &str) -> io::Result<()> {
        self.send_frame(0x1, text.as_bytes())
    }

    fn send_frame(&mut self, opcode: u8, payload: &[u8]) -> io::Result<()> {
        let mut frame = Vec::with_capacity(payload.len() + 14);
        frame.push(0x80 | opcode);
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n <= 0xffff => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        // xorshift: masking only has to vary, it protects nothing on loopback.
        self.mask_seed ^= self.mask_seed << 13;
        self.mask_seed ^= self.mask_seed >> 17;
        self.mask_seed ^= self.mask_seed << 5;
        let mask = self.mask_seed.to_be_bytes();
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.writer.write_all(&frame)
    }

    /// The next text message (pings answered on the way). A read timeout is `TimedOut` /
    /// `WouldBlock`; a close from the browser is `ConnectionAborted`.
    pub(crate) fn read_text(&mut self) -> io::Result<String> {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.reader.read_exact(&mut head)?;
            let (fin, opcode) = (head[0] & 0x80 != 0, head[0] & 0x0f);
            let masked = head[1] & 0x80 != 0;
            let len = match head[1] & 0x7f {
                126 => {
                    let mut b = [0u8; 2];
                    self.reader.read_exact(&mut b)?;
                    u64::from(u16::from_be_bytes(b))
                }
                127 => {
                    let mut b = [0u8; 8];
                    self.reader.read_exact(&mut b)?;
                    u64::from_be_bytes(b)
                }
                n => u64::from(n),
            };
            let len = usize::try_from(len).map_err(|_| invalid("frame too large"))?;
            if message.len() + len > MAX_MESSAGE {
                return Err(invalid("message too large"));
            }
            let mut mask = [0u8; 4];
            if masked {
                self.reader.read_exact(&mut mask)?;
            }
            let mut payload = vec![0u8; len];
            self.reader.read_exact(&mut payload)?;
            if masked {
                for (i, b) in payload.iter_mut().enumerate() {
                    *b ^= mask[i % 4];
                }
            }
            match opcode {
                0x0..=0x2 => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return String::from_utf8(message).map_err(|_| invalid("not UTF-8"));
                    }
                }
                0x8 => {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "the browser closed the DevTools connection",
                    ));
                }
                0x9 => self.send_frame(0xA, &payload)?,
                _ => {}
            }
        }
    }
}
