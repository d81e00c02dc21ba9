//! Sequence-number and timestamp arithmetic (FreeBSD's `tcp_seq.h`): comparisons
//! modulo 2^32 (RFC 9293 §3.4) and the timestamp clock (RFC 7323 §5.4). Functions of
//! their arguments alone; they call nothing.

use dev::Instant;

/// `a < b` in sequence space.
#[inline]
pub(super) fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[inline]
pub(super) fn le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

#[inline]
pub(super) fn diff(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b)
}

/// The timestamp clock: milliseconds, shifted by the connection's `offset`.
pub(super) fn tsval(now: Instant, offset: u32) -> u32 {
    (now.as_millis() as u32).wrapping_add(offset)
}
