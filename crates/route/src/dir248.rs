//! DIR-24-8 (Gupta, Lin, McKeown, "Routing lookups in hardware at memory access
//! speeds", INFOCOM 1998): a first table indexed by the top 24 bits of the address
//! (16M entries), and for each /24 that holds longer prefixes a 256-entry chunk
//! indexed by the last 8 bits. At most two memory reads a lookup, at the price of
//! 64 MiB for the first table (its entries are `u32` so that next-hop indexes are not
//! limited to 15 bits) and of a cache miss on nearly every lookup of a large table.

use crate::{check_nexthop, Lookup, Prefix4};
use std::mem::size_of;

/// An entry: a next hop, [`NONE`], or (high bit set) the index of a chunk.
const CHUNK: u32 = 0x8000_0000;
const NONE: u32 = 0x7fff_ffff;

/// DIR-24-8: IPv4 only, built once.
#[derive(Clone)]
pub struct Dir248 {
    tbl24: Vec<u32>,
    /// Chunk `i` is `tbl8[i * 256..][..256]`.
    tbl8: Vec<u32>,
}

impl std::fmt::Debug for Dir248 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dir248")
            .field("chunks", &(self.tbl8.len() / 256))
            .finish()
    }
}

impl Lookup for Dir248 {
    type Addr = u32;

    fn build(routes: &[(Prefix4, u32)]) -> Self {
        let mut sorted: Vec<(Prefix4, u32)> = routes
            .iter()
            .map(|&(p, nh)| {
                check_nexthop(nh);
                (Prefix4::new(p.addr, p.len), nh)
            })
            .collect();
        // Shorter prefixes first, each painted over by the longer ones inside it; the
        // sort is stable, so of two equal prefixes the later one wins.
        sorted.sort_by_key(|(p, _)| p.len);
        let mut t = Dir248 {
            tbl24: vec![NONE; 1 << 24],
            tbl8: Vec::new(),
        };
        for (p, nh) in sorted {
            let i = (p.addr >> 8) as usize;
            if p.len <= 24 {
                t.tbl24[i..i + (1 << (24 - p.len))].fill(nh);
            } else {
                let e = t.tbl24[i];
                let c = if e & CHUNK != 0 {
                    (e & !CHUNK) as usize
                } else {
                    // Every prefix of /24 or shorter is painted already: the chunk
                    // starts with what covers the whole /24.
                    let c = t.tbl8.len() / 256;
                    t.tbl8.extend(std::iter::repeat_n(e, 256));
                    t.tbl24[i] = CHUNK | c as u32;
                    c
                };
                let j = c * 256 + (p.addr & 0xff) as usize;
                t.tbl8[j..j + (1 << (32 - p.len))].fill(nh);
            }
        }
        t.tbl8.shrink_to_fit();
        t
    }

    #[inline]
    fn lookup(&self, addr: u32) -> Option<u32> {
        let mut e = self.tbl24[(addr >> 8) as usize];
        if e & CHUNK != 0 {
            e = self.tbl8[((e & !CHUNK) as usize) << 8 | (addr & 0xff) as usize];
        }
        (e != NONE).then_some(e)
    }

    fn memory(&self) -> usize {
        (self.tbl24.capacity() + self.tbl8.capacity()) * size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_inherit_the_covering_route() {
        let t = Dir248::build(&[
            (Prefix4::new(0x0a00_0000, 8), 1),
            (Prefix4::new(0x0a00_0080, 25), 2),
            (Prefix4::new(0x0a00_00ff, 32), 3),
            (Prefix4::new(0, 0), 4),
        ]);
        assert_eq!(t.lookup(0x0a00_0001), Some(1));
        assert_eq!(t.lookup(0x0a00_0081), Some(2));
        assert_eq!(t.lookup(0x0a00_00ff), Some(3));
        assert_eq!(t.lookup(0x0a00_0100), Some(1));
        assert_eq!(t.lookup(0x0b00_0000), Some(4));
        assert_eq!(t.tbl8.len(), 256);
    }

    #[test]
    fn empty_table_finds_nothing_and_later_duplicates_win() {
        assert_eq!(Dir248::build(&[]).lookup(0x0102_0304), None);
        let p = Prefix4::new(0x0102_0300, 24);
        assert_eq!(
            Dir248::build(&[(p, 1), (p, 2)]).lookup(0x0102_0304),
            Some(2)
        );
    }
}
