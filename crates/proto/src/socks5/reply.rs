//! RFC 1928 §6 reply codes.

use std::fmt;
use std::io;

/// The `REP` field of a SOCKS5 reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reply {
    /// 0x00
    Succeeded,
    /// 0x01
    GeneralFailure,
    /// 0x02: connection not allowed by ruleset.
    NotAllowed,
    /// 0x03
    NetworkUnreachable,
    /// 0x04
    HostUnreachable,
    /// 0x05
    ConnectionRefused,
    /// 0x06
    TtlExpired,
    /// 0x07
    CommandNotSupported,
    /// 0x08
    AddressTypeNotSupported,
    /// 0x09..=0xFF: not assigned by RFC 1928; kept so a client can report what it got.
    Unassigned(u8),
}

impl Reply {
    /// The wire value.
    pub fn code(self) -> u8 {
        match self {
            Self::Succeeded => 0x00,
            Self::GeneralFailure => 0x01,
            Self::NotAllowed => 0x02,
            Self::NetworkUnreachable => 0x03,
            Self::HostUnreachable => 0x04,
            Self::ConnectionRefused => 0x05,
            Self::TtlExpired => 0x06,
            Self::CommandNotSupported => 0x07,
            Self::AddressTypeNotSupported => 0x08,
            Self::Unassigned(code) => code,
        }
    }

    /// The reply for a wire value.
    pub fn from_code(code: u8) -> Self {
        match code {
            0x00 => Self::Succeeded,
            0x01 => Self::GeneralFailure,
            0x02 => Self::NotAllowed,
            0x03 => Self::NetworkUnreachable,
            0x04 => Self::HostUnreachable,
            0x05 => Self::ConnectionRefused,
            0x06 => Self::TtlExpired,
            0x07 => Self::CommandNotSupported,
            0x08 => Self::AddressTypeNotSupported,
            other => Self::Unassigned(other),
        }
    }

    /// The reply that best describes a failed outgoing connect, for a server that dials
    /// the target itself.
    pub fn from_io_error(err: &io::Error) -> Self {
        match err.kind() {
            // A target that resets the connection as it is made refused it, in effect.
            io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted => Self::ConnectionRefused,
            io::ErrorKind::NetworkUnreachable => Self::NetworkUnreachable,
            io::ErrorKind::HostUnreachable | io::ErrorKind::TimedOut => Self::HostUnreachable,
            io::ErrorKind::AddrNotAvailable | io::ErrorKind::Unsupported => {
                Self::AddressTypeNotSupported
            }
            _ => Self::GeneralFailure,
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Self::Succeeded => "succeeded",
            Self::GeneralFailure => "general SOCKS server failure",
            Self::NotAllowed => "connection not allowed by ruleset",
            Self::NetworkUnreachable => "network unreachable",
            Self::HostUnreachable => "host unreachable",
            Self::ConnectionRefused => "connection refused",
            Self::TtlExpired => "TTL expired",
            Self::CommandNotSupported => "command not supported",
            Self::AddressTypeNotSupported => "address type not supported",
            Self::Unassigned(code) => return write!(f, "unassigned reply code {code:#04x}"),
        };
        f.write_str(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for code in 0..=u8::MAX {
            assert_eq!(Reply::from_code(code).code(), code);
        }
        assert_eq!(Reply::from_code(5), Reply::ConnectionRefused);
        assert_eq!(
            Reply::Unassigned(0x42).to_string(),
            "unassigned reply code 0x42"
        );
    }

    #[test]
    fn maps_connect_errors() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(Reply::from_io_error(&refused), Reply::ConnectionRefused);
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(Reply::from_io_error(&reset), Reply::ConnectionRefused);
        let timed_out = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(Reply::from_io_error(&timed_out), Reply::HostUnreachable);
        let other = io::Error::other("boom");
        assert_eq!(Reply::from_io_error(&other), Reply::GeneralFailure);
    }
}
