//! TCP options (RFC 9293 §3.1): each option parsed and emitted, the iterator over
//! a header's options, the timestamps (RFC 7323) and the Fast Open cookie (RFC 7413).

use super::field;
use crate::{read_u16, read_u32, write_u16, write_u32, Error, Result};

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpOption<'a> {
    /// End of option list (kind 0); what follows is padding.
    EndOfList,
    /// No-operation (kind 1), used for alignment.
    NoOperation,
    /// Maximum segment size (kind 2, SYN only).
    MaxSegmentSize(u16),
    /// Window scale shift count (kind 3, SYN only).
    WindowScale(u8),
    /// SACK permitted (kind 4, SYN only).
    SackPermitted,
    /// SACK blocks (kind 5): up to four `(left edge, right edge)` pairs.
    SackRange([Option<(u32, u32)>; 4]),
    /// Timestamps (kind 8).
    Timestamps {
        /// Sender's timestamp value.
        tsval: u32,
        /// Echoed timestamp.
        tsecr: u32,
    },
    /// Fast Open (kind 34, RFC 7413 §4.1.1): a cookie, or none (a cookie
    /// request). Also parsed from the experimental kind 254 with magic 0xF989. A
    /// cookie of a length the RFC does not allow parses as `Unknown`.
    FastOpen(TcpFastOpenCookie),
    /// Any other option, skipped by its length.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data (after kind and length).
        data: &'a [u8],
    },
}

impl<'a> TcpOption<'a> {
    /// Read one option from the front of `buffer`; return the rest and the option.
    ///
    /// `Err(Malformed)` if the length byte is missing, below 2, runs past the buffer, or is
    /// wrong for a known kind (RFC 9293 §3.1: a receiver must handle an illegal length
    /// without crashing; we drop the segment).
    pub fn parse(buffer: &'a [u8]) -> Result<(&'a [u8], TcpOption<'a>)> {
        let (&kind, rest) = buffer.split_first().ok_or(Error::Truncated)?;
        match kind {
            field::OPT_END => return Ok((rest, TcpOption::EndOfList)),
            field::OPT_NOP => return Ok((rest, TcpOption::NoOperation)),
            _ => {}
        }
        let &len = rest.first().ok_or(Error::Malformed)?;
        let len = usize::from(len);
        if len < 2 || len > buffer.len() {
            return Err(Error::Malformed);
        }
        let data = &buffer[2..len];
        let rest = &buffer[len..];
        let option = match (kind, len) {
            (field::OPT_MSS, 4) => TcpOption::MaxSegmentSize(read_u16(data, 0)),
            (field::OPT_WS, 3) => TcpOption::WindowScale(data[0]),
            (field::OPT_SACKPERM, 2) => TcpOption::SackPermitted,
            (field::OPT_TSTAMP, 10) => TcpOption::Timestamps {
                tsval: read_u32(data, 0),
                tsecr: read_u32(data, 4),
            },
            (field::OPT_SACKRNG, _) if (len - 2) % 8 == 0 && len <= 2 + 4 * 8 => {
                let mut ranges = [None; 4];
                for (slot, block) in ranges.iter_mut().zip(data.chunks_exact(8)) {
                    *slot = Some((read_u32(block, 0), read_u32(block, 4)));
                }
                TcpOption::SackRange(ranges)
            }
            (field::OPT_FASTOPEN, _) => match TcpFastOpenCookie::new(data) {
                Some(c) => TcpOption::FastOpen(c),
                None => TcpOption::Unknown { kind, data },
            },
            (field::OPT_EXP, 4..) if read_u16(data, 0) == field::FASTOPEN_EXP_MAGIC => {
                match TcpFastOpenCookie::new(&data[2..]) {
                    Some(c) => TcpOption::FastOpen(c),
                    None => TcpOption::Unknown { kind, data },
                }
            }
            (
                field::OPT_MSS
                | field::OPT_WS
                | field::OPT_SACKPERM
                | field::OPT_TSTAMP
                | field::OPT_SACKRNG,
                _,
            ) => return Err(Error::Malformed),
            (kind, _) => TcpOption::Unknown { kind, data },
        };
        Ok((rest, option))
    }

    /// Bytes this option takes when emitted.
    pub fn buffer_len(&self) -> usize {
        match self {
            TcpOption::EndOfList | TcpOption::NoOperation => 1,
            TcpOption::MaxSegmentSize(_) => 4,
            TcpOption::WindowScale(_) => 3,
            TcpOption::SackPermitted => 2,
            TcpOption::SackRange(ranges) => 2 + 8 * ranges.iter().flatten().count(),
            TcpOption::Timestamps { .. } => 10,
            TcpOption::FastOpen(c) => 2 + c.len(),
            TcpOption::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Write the option at the front of `buffer`; return the rest.
    ///
    /// # Panics
    /// If `buffer` is shorter than [`buffer_len`](Self::buffer_len), or an `Unknown`
    /// option's data is longer than 253 bytes.
    pub fn emit<'b>(&self, buffer: &'b mut [u8]) -> &'b mut [u8] {
        let len = self.buffer_len();
        let (out, rest) = buffer.split_at_mut(len);
        match *self {
            TcpOption::EndOfList => out[0] = field::OPT_END,
            TcpOption::NoOperation => out[0] = field::OPT_NOP,
            TcpOption::MaxSegmentSize(mss) => {
                out[..2].copy_from_slice(&[field::OPT_MSS, 4]);
                write_u16(out, 2, mss);
            }
            TcpOption::WindowScale(shift) => {
                out.copy_from_slice(&[field::OPT_WS, 3, shift]);
            }
            TcpOption::SackPermitted => out.copy_from_slice(&[field::OPT_SACKPERM, 2]),
            TcpOption::SackRange(ranges) => {
                out[..2].copy_from_slice(&[field::OPT_SACKRNG, len as u8]);
                for (i, (left, right)) in ranges.iter().flatten().enumerate() {
                    write_u32(out, 2 + 8 * i, *left);
                    write_u32(out, 6 + 8 * i, *right);
                }
            }
            TcpOption::Timestamps { tsval, tsecr } => {
                out[..2].copy_from_slice(&[field::OPT_TSTAMP, 10]);
                write_u32(out, 2, tsval);
                write_u32(out, 6, tsecr);
            }
            TcpOption::FastOpen(c) => {
                out[..2].copy_from_slice(&[field::OPT_FASTOPEN, len as u8]);
                out[2..].copy_from_slice(c.as_bytes());
            }
            TcpOption::Unknown { kind, data } => {
                out[0] = kind;
                out[1] = u8::try_from(len).expect("TCP option too long");
                out[2..].copy_from_slice(data);
            }
        }
        rest
    }
}

/// Iterator over the options of a TCP header. Yields `Err` once and stops on a malformed
/// option; stops after `EndOfList`.
#[derive(Debug, Clone)]
pub struct TcpOptionsIter<'a> {
    rest: &'a [u8],
}

impl<'a> TcpOptionsIter<'a> {
    /// Iterate over raw option bytes.
    pub const fn new(options: &'a [u8]) -> TcpOptionsIter<'a> {
        TcpOptionsIter { rest: options }
    }
}

impl<'a> Iterator for TcpOptionsIter<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        match TcpOption::parse(self.rest) {
            Ok((rest, option)) => {
                self.rest = if option == TcpOption::EndOfList {
                    &[]
                } else {
                    rest
                };
                Some(Ok(option))
            }
            Err(e) => {
                self.rest = &[];
                Some(Err(e))
            }
        }
    }
}

/// The timestamps option (RFC 7323 §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpTimestampRepr {
    /// Sender's timestamp value.
    pub tsval: u32,
    /// Echoed timestamp (0 unless ACK is set).
    pub tsecr: u32,
}

/// A Fast Open cookie (RFC 7413 §4.1.1): empty (in a SYN, a cookie request) or
/// 4 to 16 bytes, an even number. Held by value, so that a segment to send can
/// carry one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TcpFastOpenCookie {
    len: u8,
    bytes: [u8; 16],
}

impl TcpFastOpenCookie {
    /// The shortest and longest cookie (RFC 7413 §4.1.1).
    pub const MIN_LEN: usize = 4;
    pub const MAX_LEN: usize = 16;

    /// `b` as a cookie, if its length is one the RFC allows ("The cookie MUST be
    /// between 4 and 16 bytes, inclusive"; the option length "MUST be even"), or
    /// empty: a request.
    pub fn new(b: &[u8]) -> Option<TcpFastOpenCookie> {
        let ok = b.is_empty()
            || ((Self::MIN_LEN..=Self::MAX_LEN).contains(&b.len()) && b.len().is_multiple_of(2));
        if !ok {
            return None;
        }
        let mut c = TcpFastOpenCookie {
            len: b.len() as u8,
            bytes: [0; 16],
        };
        c.bytes[..b.len()].copy_from_slice(b);
        Some(c)
    }

    /// The empty option: a cookie request.
    pub const REQUEST: TcpFastOpenCookie = TcpFastOpenCookie {
        len: 0,
        bytes: [0; 16],
    };

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// A request, not a cookie.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}
