//! Poptrie (Asai, Ohara, "Poptrie: a compressed trie with population count for fast
//! and scalable software IP routing table lookup", SIGCOMM 2015), for IPv4 and IPv6.
//!
//! The top `DIRECT` bits of the address index a direct table ("direct pointing",
//! §3.4): an entry is either a next hop or the root of a subtree. A subtree node
//! consumes 6 bits (64 branches); two 64-bit maps say which branches are internal
//! nodes (`vector`) and where a new run of equal leaves starts (`leafvec`, the leaf
//! compression of §3.3). A node's children and its leaves are each stored
//! contiguously, so the child or leaf for branch `v` is found at its base plus a
//! popcount of the map up to `v`: a node is 24 bytes, a leaf 4.
//!
//! One generic structure serves both families ([`Poptrie4`], [`Poptrie6`]); the walk
//! shifts the address left by constant amounts, cheap even on a `u128`. The direct
//! table's width is chosen per family on the full BGP table (`mpstack bench lpm` has
//! rows for 16 and 20 bits; docs/benchmark-history.md):
//!
//! - IPv4, 18 bits (1 MiB): a /24 is a leaf of the first node, and 75% of uniform keys
//!   end in the direct table. 16 bits needs a second node level for every /24 (twice
//!   the memory, a half to a third of the speed); 20 bits ends 86% of uniform keys
//!   in the direct table, but that table is 4 MiB, out of L2: slower on both key
//!   sets.
//! - IPv6, 18 bits: most prefixes are /32 to /48, and an 18-bit table followed by five
//!   6-bit levels ends exactly at bit 48. A key inside an announced prefix reads 4.63
//!   nodes on average (5.23 with 16 bits, 4.39 with 20 bits at twice the memory);
//!   the measured speeds of the three were within the machine's noise, so 18: as
//!   small as 16 (3.4 MiB in all), fewer nodes read.
//!
//! Built from an uncompressed binary trie of the routes (a transient, larger
//! structure); the result is immutable, and a change means building a new one.
//! [`Lookup::lookup_batch`] reads the direct entries of 16 addresses before walking
//! any of them, so that those reads overlap.

use crate::{check_nexthop, Addr, Lookup, Prefix};
use std::mem::size_of;

/// Poptrie for IPv4 with the paper's 18-bit direct pointing.
pub type Poptrie4 = Poptrie<u32, 18>;
/// Poptrie for IPv6; 18 direct bits (see the module documentation).
pub type Poptrie6 = Poptrie<u128, 18>;

const STRIDE: u32 = 6;
/// Addresses walked in lock step by `lookup_batch`.
const LANES: usize = 16;

/// A direct entry with this bit set is a next hop (or [`NONE`]), else a node index.
const LEAF: u32 = 0x8000_0000;
const NONE: u32 = 0x7fff_ffff;
const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug, Default)]
struct Node {
    /// Bit `v`: branch `v` is an internal node.
    vector: u64,
    /// Bit `v`: branch `v` is a leaf that differs from the previous leaf branch.
    leafvec: u64,
    /// Index of this node's first leaf.
    base0: u32,
    /// Index of this node's first child node.
    base1: u32,
}

/// Poptrie with a direct table of `2^DIRECT` entries (`DIRECT` in `1..=24`), over
/// addresses `A` (`u32` or `u128`); built once.
#[derive(Clone)]
pub struct Poptrie<A: Addr, const DIRECT: u32> {
    direct: Vec<u32>,
    nodes: Vec<Node>,
    leaves: Vec<u32>,
    _addr: std::marker::PhantomData<A>,
}

impl<A: Addr, const DIRECT: u32> std::fmt::Debug for Poptrie<A, DIRECT> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Poptrie")
            .field("direct_bits", &DIRECT)
            .field("nodes", &self.nodes.len())
            .field("leaves", &self.leaves.len())
            .finish()
    }
}

/// The binary trie the poptrie is built from: node 0 is the root (length 0).
struct BinTrie {
    child: Vec<[u32; 2]>,
    nh: Vec<u32>,
}

impl BinTrie {
    fn new<A: Addr>(routes: &[(Prefix<A>, u32)]) -> Self {
        let mut t = BinTrie {
            child: vec![[NIL; 2]],
            nh: vec![NONE],
        };
        for &(p, nh) in routes {
            check_nexthop(nh);
            let p = Prefix::new(p.addr, p.len);
            let mut n = 0usize;
            for i in 0..p.len {
                let b = p.addr.bit(i);
                if t.child[n][b] == NIL {
                    t.child[n][b] = t.child.len() as u32;
                    t.child.push([NIL; 2]);
                    t.nh.push(NONE);
                }
                n = t.child[n][b] as usize;
            }
            t.nh[n] = nh;
        }
        t
    }

    fn is_leaf(&self, n: u32) -> bool {
        self.child[n as usize] == [NIL; 2]
    }

    /// The next hop at `n` if it has one, else `def`.
    fn nh_or(&self, n: u32, def: u32) -> u32 {
        match self.nh[n as usize] {
            NONE => def,
            nh => nh,
        }
    }
}

impl<A: Addr, const DIRECT: u32> Poptrie<A, DIRECT> {
    /// Fills the direct entries under trie node `t` (at `depth`, the entry index
    /// prefix `idx`); `def` is the next hop of the longest prefix above `t`.
    fn direct_fill(&mut self, bt: &BinTrie, t: u32, depth: u32, idx: usize, def: u32) {
        let def = if t == NIL { def } else { bt.nh_or(t, def) };
        if depth == DIRECT {
            self.direct[idx] = if t != NIL && !bt.is_leaf(t) {
                let slot = self.nodes.len();
                self.nodes.push(Node::default());
                self.node_fill(bt, slot, t, DIRECT, def);
                slot as u32
            } else {
                LEAF | def
            };
            return;
        }
        if t == NIL || bt.is_leaf(t) {
            let span = 1usize << (DIRECT - depth);
            self.direct[idx * span..(idx + 1) * span].fill(LEAF | def);
            return;
        }
        for b in 0..2 {
            let c = bt.child[t as usize][b];
            self.direct_fill(bt, c, depth + 1, idx << 1 | b, def);
        }
    }

    /// Makes `nodes[slot]` the node for trie node `t` at `depth`, whose own route (or
    /// the one above it) is `def`.
    fn node_fill(&mut self, bt: &BinTrie, slot: usize, t: u32, depth: u32, def: u32) {
        let mut node = Node {
            base0: self.leaves.len() as u32,
            ..Node::default()
        };
        let mut inner = Vec::new();
        let mut last = None;
        for v in 0..64u32 {
            let (mut n, mut nh) = (t, def);
            for k in 0..STRIDE {
                n = bt.child[n as usize][((v >> (STRIDE - 1 - k)) & 1) as usize];
                if n == NIL {
                    break;
                }
                nh = bt.nh_or(n, nh);
            }
            // Past the address's last bit the key is padded with zeros: no trie node
            // lies that deep.
            debug_assert!(depth + STRIDE <= A::BITS as u32 || n == NIL || bt.is_leaf(n));
            if n != NIL && !bt.is_leaf(n) {
                node.vector |= 1 << v;
                inner.push((n, nh));
            } else if last != Some(nh) {
                node.leafvec |= 1 << v;
                self.leaves.push(nh);
                last = Some(nh);
            }
        }
        node.base1 = self.nodes.len() as u32;
        self.nodes
            .resize(self.nodes.len() + inner.len(), Node::default());
        self.nodes[slot] = node;
        for (j, (n, nh)) in inner.into_iter().enumerate() {
            self.node_fill(bt, node.base1 as usize + j, n, depth + STRIDE, nh);
        }
    }

    /// The walk below a direct entry that is a node (`n`), `key` shifted past the
    /// direct bits. Branches, predicted, walk faster than a branch-free step
    /// (measured: the CPU runs ahead on the prediction instead of waiting on each
    /// node's popcount).
    #[inline(always)]
    fn walk(&self, n: usize, key: A) -> Option<u32> {
        found(self.leaves[self.walk_leaf(n, key)])
    }

    /// [`Poptrie::walk`] up to the index of the leaf it ends in, not read.
    #[inline(always)]
    fn walk_leaf(&self, mut n: usize, mut key: A) -> usize {
        loop {
            let node = &self.nodes[n];
            let v = key.top_bits(STRIDE);
            // Bits 0..=v; for v = 63 the shift gives 0 and the subtraction wraps.
            let upto = (2u64 << v).wrapping_sub(1);
            if node.vector & (1 << v) != 0 {
                n = (node.base1 + (node.vector & upto).count_ones() - 1) as usize;
                key = key.shift_out(STRIDE);
            } else {
                let i = node.base0 + (node.leafvec & upto).count_ones() - 1;
                return i as usize;
            }
        }
    }
}

#[inline(always)]
fn found(leaf: u32) -> Option<u32> {
    (leaf != NONE).then_some(leaf)
}

impl<A: Addr, const DIRECT: u32> Lookup for Poptrie<A, DIRECT> {
    type Addr = A;

    fn build(routes: &[(Prefix<A>, u32)]) -> Self {
        const { assert!(DIRECT >= 1 && DIRECT <= 24) };
        let bt = BinTrie::new(routes);
        let mut p = Poptrie {
            direct: vec![LEAF | NONE; 1 << DIRECT],
            nodes: Vec::new(),
            leaves: Vec::new(),
            _addr: std::marker::PhantomData,
        };
        p.direct_fill(&bt, 0, 0, 0, NONE);
        p.nodes.shrink_to_fit();
        p.leaves.shrink_to_fit();
        p
    }

    #[inline]
    fn lookup(&self, addr: A) -> Option<u32> {
        let e = self.direct[addr.top_bits(DIRECT)];
        if e & LEAF != 0 {
            return found(e & !LEAF);
        }
        self.walk(e as usize, addr.shift_out(DIRECT))
    }

    /// `LANES` (16) addresses at a time, in three passes whose reads do not wait on
    /// one another across lanes, so that their cache misses overlap: the direct
    /// entries; the walks down to a leaf's index; the leaves. (Reading each leaf at
    /// the end of its walk left one miss after another: on a full table, the leaf
    /// read was a fifth of a forwarded packet's time.)
    fn lookup_batch(&self, addrs: &[A], out: &mut [Option<u32>]) {
        assert_eq!(addrs.len(), out.len(), "lookup_batch: lengths differ");
        const DONE: usize = usize::MAX;
        for (addrs, out) in addrs.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let mut e = [0u32; LANES];
            for (e, &a) in e.iter_mut().zip(addrs) {
                *e = self.direct[a.top_bits(DIRECT)];
            }
            let mut leaf = [DONE; LANES];
            for (((o, l), &e), &a) in out.iter_mut().zip(&mut leaf).zip(&e).zip(addrs) {
                if e & LEAF != 0 {
                    *o = found(e & !LEAF);
                } else {
                    *l = self.walk_leaf(e as usize, a.shift_out(DIRECT));
                }
            }
            for (o, &l) in out.iter_mut().zip(&leaf) {
                if l != DONE {
                    *o = found(self.leaves[l]);
                }
            }
        }
    }

    fn memory(&self) -> usize {
        self.direct.capacity() * size_of::<u32>()
            + self.nodes.capacity() * size_of::<Node>()
            + self.leaves.capacity() * size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Prefix4, Prefix6};

    #[test]
    fn direct_entries_nodes_and_compressed_leaves() {
        let routes = [
            (Prefix4::new(0, 0), 7),
            (Prefix4::new(0x0a00_0000, 8), 1),
            (Prefix4::new(0x0a00_0080, 25), 2),
            (Prefix4::new(0x0a00_00ff, 32), 3),
            (Prefix4::new(0x0a00_4000, 18), 4),
        ];
        let t = Poptrie4::build(&routes);
        assert_eq!(t.lookup(0x0b00_0000), Some(7));
        assert_eq!(t.lookup(0x0a00_0001), Some(1));
        assert_eq!(t.lookup(0x0a00_0081), Some(2));
        assert_eq!(t.lookup(0x0a00_00ff), Some(3));
        assert_eq!(t.lookup(0x0a00_00fe), Some(2));
        assert_eq!(t.lookup(0x0a00_4001), Some(4));
        assert_eq!(t.lookup(0x0a00_8001), Some(1));
        // One /18 subtree (10.0.0.0/18) of three levels, down to the /32.
        assert_eq!(t.nodes.len(), 3);
        // Leaf compression: the top node has one internal branch and one run of 1s.
        assert_eq!(t.nodes[0].leafvec.count_ones(), 1);
    }

    #[test]
    fn empty_and_host_routes() {
        assert_eq!(Poptrie4::build(&[]).lookup(1), None);
        let t = Poptrie4::build(&[(Prefix4::new(u32::MAX, 32), 5), (Prefix4::new(0, 32), 6)]);
        assert_eq!(t.lookup(u32::MAX), Some(5));
        assert_eq!(t.lookup(u32::MAX - 1), None);
        assert_eq!(t.lookup(0), Some(6));
        assert_eq!(t.lookup(1), None);
    }

    #[test]
    fn ipv6_a_48_is_found_in_the_fifth_node() {
        // 18 direct bits and five 6-bit levels end exactly at bit 48.
        let p48 = Prefix6::new(0x2001_0db8_1234 << 80, 48);
        let t = Poptrie6::build(&[(Prefix6::new(0x2001_0db8 << 96, 32), 1), (p48, 2)]);
        assert_eq!(t.nodes.len(), 5);
        assert_eq!(t.lookup(p48.addr | 0xffff), Some(2));
        assert_eq!(t.lookup(p48.addr ^ (1 << 80)), Some(1));
        assert_eq!(t.lookup(0x2002 << 112), None);
        assert!(t.memory() >= (1 << 18) * 4);
    }
}
