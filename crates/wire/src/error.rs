//! The one error type of the `wire` crate.
//!
//! Four kinds are enough for a receive path: each maps onto a `netstat -s` style counter in
//! the stack (`ipstat.toosmall`, `ipstat.badhlen`, `ipstat.badsum`, ...), and none carries
//! data, so returning one costs nothing.

use core::fmt;

/// Why a packet could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than a header or a length field says it must be.
    Truncated,
    /// A field holds a value the format forbids (bad version, header length below the
    /// minimum, option length of zero, ...).
    Malformed,
    /// The checksum does not verify.
    Checksum,
    /// The packet is well formed but describes something this crate does not represent
    /// (ARP for a non-Ethernet/IPv4 pair, an unknown ICMP type, ...).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "checksum error",
            Error::Unsupported => "unsupported packet",
        })
    }
}

impl std::error::Error for Error {}

/// The result type of every parser in this crate.
pub type Result<T> = core::result::Result<T, Error>;
