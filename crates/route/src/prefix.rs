//! Prefixes of one address family, generic over the address as an unsigned integer
//! in host order (most significant bit first on the wire).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An address as an unsigned integer: `u32` (IPv4) or `u128` (IPv6).
pub trait Addr: Copy + Eq + Ord + fmt::Debug + std::hash::Hash {
    /// Bits in an address.
    const BITS: u8;
    /// The all-zero address.
    const ZERO: Self;
    /// Bit `i`, counted from the most significant (bit 0 is the first on the wire).
    fn bit(self, i: u8) -> usize;
    /// The address with all bits past the first `len` cleared.
    fn masked(self, len: u8) -> Self;
    /// How many leading bits `self` and `other` share.
    fn common(self, other: Self) -> u8;
    /// The first `n` bits (`1..=32`) as an integer: the index of a table of `2^n`
    /// entries.
    fn top_bits(self, n: u32) -> usize;
    /// The address shifted left by `n` (`< BITS`) bits: the first `n` bits consumed,
    /// zeros shifted in. The tries step through an address with this and `top_bits`,
    /// both by constant amounts, which is cheap even on `u128`.
    fn shift_out(self, n: u32) -> Self;
    /// The last address of the prefix of length `len` holding `self` (every bit past
    /// `len` set).
    fn last(self, len: u8) -> Self;
    /// The next address, if `self` is not the last of all.
    fn checked_succ(self) -> Option<Self>;
    /// Writes the address in its usual text form.
    fn fmt_addr(self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

macro_rules! impl_addr {
    ($t:ty, $ip:ty) => {
        impl Addr for $t {
            const BITS: u8 = <$t>::BITS as u8;
            const ZERO: Self = 0;
            #[inline]
            fn bit(self, i: u8) -> usize {
                ((self >> (<$t>::BITS - 1 - i as u32)) & 1) as usize
            }
            #[inline]
            fn masked(self, len: u8) -> Self {
                if len == 0 {
                    0
                } else {
                    self & (<$t>::MAX << (<$t>::BITS - len as u32))
                }
            }
            #[inline]
            fn common(self, other: Self) -> u8 {
                (self ^ other).leading_zeros() as u8
            }
            #[inline(always)]
            fn top_bits(self, n: u32) -> usize {
                debug_assert!((1..=32).contains(&n));
                (self >> (<$t>::BITS - n)) as usize
            }
            #[inline(always)]
            fn shift_out(self, n: u32) -> Self {
                debug_assert!(n < <$t>::BITS);
                self << n
            }
            #[inline]
            fn last(self, len: u8) -> Self {
                if len == 0 {
                    <$t>::MAX
                } else if u32::from(len) >= <$t>::BITS {
                    self
                } else {
                    self | (<$t>::MAX >> len as u32)
                }
            }
            #[inline]
            fn checked_succ(self) -> Option<Self> {
                self.checked_add(1)
            }
            fn fmt_addr(self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", <$ip>::from(self))
            }
        }
    };
}
impl_addr!(u32, Ipv4Addr);
impl_addr!(u128, Ipv6Addr);

/// A prefix: the first `len` bits of `addr` (the others are always zero).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Prefix<A> {
    pub addr: A,
    pub len: u8,
}

/// An IPv4 prefix.
pub type Prefix4 = Prefix<u32>;
/// An IPv6 prefix.
pub type Prefix6 = Prefix<u128>;

impl<A: Addr> Prefix<A> {
    /// The prefix of length `len` holding `addr` (bits past `len` are cleared; `len` is
    /// capped at the address width).
    pub fn new(addr: A, len: u8) -> Self {
        let len = len.min(A::BITS);
        Prefix {
            addr: addr.masked(len),
            len,
        }
    }

    /// Whether `addr` lies inside the prefix.
    #[inline]
    pub fn contains(&self, addr: A) -> bool {
        addr.masked(self.len) == self.addr
    }

    /// Whether `other` lies inside (or is) this prefix.
    pub fn covers(&self, other: &Self) -> bool {
        self.len <= other.len && self.contains(other.addr)
    }
}

impl<A: Addr> fmt::Debug for Prefix<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.addr.fmt_addr(f)?;
        write!(f, "/{}", self.len)
    }
}

impl<A: Addr> fmt::Display for Prefix<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_clears_host_bits_and_caps_len() {
        let p = Prefix4::new(0xc0a8_01ff, 24);
        assert_eq!(p.addr, 0xc0a8_0100);
        assert_eq!(format!("{p}"), "192.168.1.0/24");
        assert_eq!(Prefix4::new(0xffff_ffff, 0).addr, 0);
        assert_eq!(Prefix4::new(1, 40).len, 32);
        assert_eq!(Prefix6::new(u128::MAX, 0).addr, 0);
        assert_eq!(Prefix6::new(u128::MAX, 128).addr, u128::MAX);
    }

    #[test]
    fn contains_and_covers() {
        let p = Prefix4::new(0x0a00_0000, 8);
        assert!(p.contains(0x0aff_ffff));
        assert!(!p.contains(0x0b00_0000));
        assert!(Prefix4::new(0, 0).contains(u32::MAX));
        assert!(p.covers(&Prefix4::new(0x0a01_0000, 16)));
        assert!(!Prefix4::new(0x0a01_0000, 16).covers(&p));
        assert_eq!(0x8000_0000u32.bit(0), 1);
        assert_eq!(1u32.bit(31), 1);
        assert_eq!(0xf0u32.common(0xf8), 28);
    }
}
