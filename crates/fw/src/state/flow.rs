//! A flow's key in the states' fixed-size form, and the seeded hashes of it.

use super::{FlowId, LimitMask};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A flow in a fixed-size form: addresses as two `u64` (IPv4 in the low word), so
/// that keys compare and hash as plain words.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Key {
    pub(super) a: [u64; 2],
    pub(super) b: [u64; 2],
    pub(super) ap: u16,
    pub(super) bp: u16,
    pub(super) proto: u8,
    v6: bool,
}

fn addr_words(a: IpAddr, v6: bool) -> [u64; 2] {
    match a {
        IpAddr::V4(a) if !v6 => [0, u32::from(a) as u64],
        // A flow mixing families does not happen; if it did, the IPv4 side is taken
        // as its IPv4-mapped IPv6 address.
        IpAddr::V4(a) => split(u128::from(a.to_ipv6_mapped())),
        IpAddr::V6(a) => split(u128::from(a)),
    }
}

fn split(x: u128) -> [u64; 2] {
    [(x >> 64) as u64, x as u64]
}

fn join(w: [u64; 2]) -> u128 {
    (w[0] as u128) << 64 | w[1] as u128
}

impl Key {
    /// The flow as given (source first).
    pub(super) fn of(f: &FlowId) -> Key {
        let v6 = f.src.is_ipv6() || f.dst.is_ipv6();
        Key {
            a: addr_words(f.src, v6),
            b: addr_words(f.dst, v6),
            ap: f.sport,
            bp: f.dport,
            proto: f.proto,
            v6,
        }
    }

    /// The flow in canonical order (the lesser endpoint first), and whether that is
    /// the reverse of `f`'s order. Both directions of a flow give the same key.
    #[inline]
    pub(super) fn canonical(f: &FlowId) -> (Key, bool) {
        Key::of(f).canonicalized()
    }

    /// This key in canonical order, and whether that reversed it.
    #[inline(always)]
    fn canonicalized(self) -> (Key, bool) {
        if (self.a, self.ap) > (self.b, self.bp) {
            (self.swapped(), true)
        } else {
            (self, false)
        }
    }

    /// [`canonical`](Self::canonical) of an IPv4 flow given as words (host
    /// order): what `canonical` makes of the same [`FlowId`], without building one.
    #[inline(always)]
    pub(super) fn canonical_v4(
        src: u32,
        dst: u32,
        sport: u16,
        dport: u16,
        proto: u8,
    ) -> (Key, bool) {
        Key {
            a: [0, src as u64],
            b: [0, dst as u64],
            ap: sport,
            bp: dport,
            proto,
            v6: false,
        }
        .canonicalized()
    }

    /// The ports, the protocol and the family in one word (the table's `kw`, whose
    /// bits above [`KW_KEY`] are the slot's own).
    #[inline]
    pub(super) fn word(&self) -> u64 {
        self.ap as u64 | (self.bp as u64) << 16 | (self.proto as u64) << 32 | (self.v6 as u64) << 40
    }

    /// The key of the addresses' four words and [`word`](Self::word).
    pub(super) fn from_words(addr: [u64; 4], word: u64) -> Key {
        Key {
            a: [addr[0], addr[1]],
            b: [addr[2], addr[3]],
            ap: word as u16,
            bp: (word >> 16) as u16,
            proto: (word >> 32) as u8,
            v6: word & KW_V6 != 0,
        }
    }

    /// The addresses' four words, as [`from_words`](Self::from_words) takes them.
    #[inline]
    pub(super) fn addrs(&self) -> [u64; 4] {
        [self.a[0], self.a[1], self.b[0], self.b[1]]
    }

    pub(super) fn swapped(&self) -> Key {
        Key {
            a: self.b,
            b: self.a,
            ap: self.bp,
            bp: self.ap,
            ..*self
        }
    }

    pub(super) fn flow(&self) -> FlowId {
        let ip = |w: [u64; 2]| {
            if self.v6 {
                IpAddr::V6(Ipv6Addr::from(join(w)))
            } else {
                IpAddr::V4(Ipv4Addr::from(w[1] as u32))
            }
        };
        FlowId {
            proto: self.proto,
            src: ip(self.a),
            dst: ip(self.b),
            sport: self.ap,
            dport: self.bp,
        }
    }

    /// The parts `mask` keeps (the key is in the creating packet's order).
    pub(super) fn masked(&self, mask: LimitMask) -> Key {
        Key {
            a: if mask.src_addr { self.a } else { [0; 2] },
            b: if mask.dst_addr { self.b } else { [0; 2] },
            ap: if mask.src_port { self.ap } else { 0 },
            bp: if mask.dst_port { self.bp } else { 0 },
            proto: self.proto,
            v6: self.v6,
        }
    }

    /// A seeded 64-bit hash (Murmur3's finalizer over the words; two rounds for IPv4,
    /// five for IPv6).
    #[inline]
    pub(super) fn hash(&self, seed: u64) -> u64 {
        let ports = (self.ap as u64) << 32 | (self.bp as u64) << 16 | (self.proto as u64) << 8;
        if self.v6 {
            let mut h = mix64(seed ^ ports ^ 1);
            for w in [self.a[0], self.a[1], self.b[0], self.b[1]] {
                h = mix64(h.wrapping_add(K1) ^ w);
            }
            h
        } else {
            let h = mix64(seed ^ (self.a[1] << 32 | self.b[1]));
            mix64(h.wrapping_add(K1) ^ ports)
        }
    }
}

/// [`Key::word`]'s family bit, and the bits of the key in it.
pub(super) const KW_V6: u64 = 1 << 40;
pub(super) const KW_KEY: u64 = (KW_V6 << 1) - 1;

pub(super) const K1: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
pub(super) fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// Symmetric flow hash: the same for both directions of a flow (seeded). Used to
/// shard states over workers.
#[inline]
pub fn symmetric_hash(f: &FlowId, seed: u64) -> u32 {
    (Key::canonical(f).0.hash(seed) >> 32) as u32
}
