//! A binary radix (Patricia) tree in the BSD tradition (Sklower's `radix.c`): one bit
//! tested per branch, one-way branches compressed away, so the depth is bounded by the
//! number of prefixes and by the address width. Unlike `radix.c`, each node carries
//! its own prefix (and masks are not kept in a separate tree): a lookup walks down
//! from the root, remembering the last node with a route whose prefix holds the
//! address, and stops when the address leaves the node's prefix. Simple enough to be
//! obviously right, which is its job here: the oracle of the fast structures.

use crate::{Addr, Lookup, Prefix};
use std::mem::size_of;

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node<A: Addr> {
    prefix: Prefix<A>,
    /// The route of exactly this prefix; `None` on a branch-only (glue) node.
    nh: Option<u32>,
    child: [u32; 2],
}

/// A binary radix tree of routes: insert, delete, exact get and longest match.
#[derive(Clone, Debug)]
pub struct Radix<A: Addr> {
    /// Node 0 is the root, the prefix of length 0, always present.
    nodes: Vec<Node<A>>,
    free: Vec<u32>,
    routes: usize,
}

impl<A: Addr> Default for Radix<A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<A: Addr> Radix<A> {
    pub fn new() -> Self {
        Radix {
            nodes: vec![Node {
                prefix: Prefix::new(A::ZERO, 0),
                nh: None,
                child: [NIL; 2],
            }],
            free: Vec::new(),
            routes: 0,
        }
    }

    /// Routes in the tree.
    pub fn len(&self) -> usize {
        self.routes
    }

    pub fn is_empty(&self) -> bool {
        self.routes == 0
    }

    fn alloc(&mut self, prefix: Prefix<A>, nh: Option<u32>) -> u32 {
        let n = Node {
            prefix,
            nh,
            child: [NIL; 2],
        };
        if let Some(i) = self.free.pop() {
            self.nodes[i as usize] = n;
            i
        } else {
            self.nodes.push(n);
            (self.nodes.len() - 1) as u32
        }
    }

    /// Adds or replaces the route of `p`; returns the next hop it replaced.
    pub fn insert(&mut self, p: Prefix<A>, nh: u32) -> Option<u32> {
        let p = Prefix::new(p.addr, p.len);
        let mut cur = 0u32;
        loop {
            // Invariant: nodes[cur].prefix covers p.
            let node = &self.nodes[cur as usize];
            if node.prefix.len == p.len {
                let old = self.nodes[cur as usize].nh.replace(nh);
                if old.is_none() {
                    self.routes += 1;
                }
                return old;
            }
            let b = p.addr.bit(node.prefix.len);
            let child = node.child[b];
            if child == NIL {
                let leaf = self.alloc(p, Some(nh));
                self.nodes[cur as usize].child[b] = leaf;
                self.routes += 1;
                return None;
            }
            let c = self.nodes[child as usize].prefix;
            let common = c.addr.common(p.addr).min(c.len).min(p.len);
            if common == c.len {
                cur = child;
                continue;
            }
            let new = if common == p.len {
                // p sits between cur and child.
                let new = self.alloc(p, Some(nh));
                self.nodes[new as usize].child[c.addr.bit(p.len)] = child;
                new
            } else {
                // p and child part ways at bit `common`: a glue node branches there.
                let glue = self.alloc(Prefix::new(p.addr, common), None);
                let leaf = self.alloc(p, Some(nh));
                let g = &mut self.nodes[glue as usize];
                g.child[c.addr.bit(common)] = child;
                g.child[p.addr.bit(common)] = leaf;
                glue
            };
            self.nodes[cur as usize].child[b] = new;
            self.routes += 1;
            return None;
        }
    }

    /// The node holding exactly `p`, and the path of node indexes down to it.
    fn find(&self, p: Prefix<A>, path: &mut Vec<u32>) -> Option<u32> {
        let mut cur = 0u32;
        loop {
            let node = &self.nodes[cur as usize];
            if !node.prefix.covers(&p) {
                return None;
            }
            if node.prefix.len == p.len {
                return Some(cur);
            }
            path.push(cur);
            cur = node.child[p.addr.bit(node.prefix.len)];
            if cur == NIL {
                return None;
            }
        }
    }

    /// The next hop of exactly `p`.
    pub fn get(&self, p: Prefix<A>) -> Option<u32> {
        let p = Prefix::new(p.addr, p.len);
        let i = self.find(p, &mut Vec::new())?;
        self.nodes[i as usize].nh
    }

    /// Removes the route of `p`; returns its next hop.
    pub fn delete(&mut self, p: Prefix<A>) -> Option<u32> {
        let p = Prefix::new(p.addr, p.len);
        let mut path = Vec::new();
        let i = self.find(p, &mut path)?;
        let old = self.nodes[i as usize].nh.take()?;
        self.routes -= 1;
        // Remove nodes left with no route and fewer than two children (never the root):
        // first this one, then its parent if it was a glue node and is now one-way.
        let mut i = i;
        while i != 0 && self.nodes[i as usize].nh.is_none() {
            let kids: Vec<u32> = self.nodes[i as usize]
                .child
                .iter()
                .copied()
                .filter(|&c| c != NIL)
                .collect();
            if kids.len() == 2 {
                break;
            }
            let parent = path.pop().expect("a non-root node has a parent");
            let slot = self.nodes[parent as usize]
                .child
                .iter()
                .position(|&c| c == i)
                .expect("parent points at its child");
            self.nodes[parent as usize].child[slot] = kids.first().copied().unwrap_or(NIL);
            self.free.push(i);
            i = parent;
        }
        Some(old)
    }

    /// The longest prefix holding `addr` and its next hop.
    pub fn lookup_prefix(&self, addr: A) -> Option<(Prefix<A>, u32)> {
        let mut best = None;
        let mut cur = 0u32;
        while cur != NIL {
            let node = &self.nodes[cur as usize];
            if !node.prefix.contains(addr) {
                break;
            }
            if let Some(nh) = node.nh {
                best = Some((node.prefix, nh));
            }
            if node.prefix.len == A::BITS {
                break;
            }
            cur = node.child[addr.bit(node.prefix.len)];
        }
        best
    }

    /// Every route, in prefix order (address, then length).
    pub fn routes(&self) -> Vec<(Prefix<A>, u32)> {
        let mut out = Vec::with_capacity(self.routes);
        let mut stack = vec![0u32];
        while let Some(i) = stack.pop() {
            let n = &self.nodes[i as usize];
            if let Some(nh) = n.nh {
                out.push((n.prefix, nh));
            }
            for &c in n.child.iter().rev() {
                if c != NIL {
                    stack.push(c);
                }
            }
        }
        out
    }
}

impl<A: Addr> Lookup for Radix<A> {
    type Addr = A;

    fn build(routes: &[(Prefix<A>, u32)]) -> Self {
        let mut r = Radix::new();
        for &(p, nh) in routes {
            r.insert(p, nh);
        }
        r
    }

    #[inline]
    fn lookup(&self, addr: A) -> Option<u32> {
        self.lookup_prefix(addr).map(|(_, nh)| nh)
    }

    fn memory(&self) -> usize {
        self.nodes.capacity() * size_of::<Node<A>>() + self.free.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Prefix4, Prefix6};

    fn p4(s: &str) -> Prefix4 {
        let (a, l) = s.split_once('/').unwrap();
        Prefix4::new(
            u32::from(a.parse::<std::net::Ipv4Addr>().unwrap()),
            l.parse().unwrap(),
        )
    }

    fn a4(s: &str) -> u32 {
        u32::from(s.parse::<std::net::Ipv4Addr>().unwrap())
    }

    #[test]
    fn longest_prefix_wins() {
        let mut r = Radix::new();
        assert_eq!(r.lookup(a4("10.1.2.3")), None);
        r.insert(p4("10.0.0.0/8"), 1);
        r.insert(p4("10.1.0.0/16"), 2);
        r.insert(p4("10.1.2.0/24"), 3);
        r.insert(p4("10.1.2.3/32"), 4);
        assert_eq!(r.lookup(a4("10.1.2.3")), Some(4));
        assert_eq!(r.lookup(a4("10.1.2.4")), Some(3));
        assert_eq!(r.lookup(a4("10.1.3.4")), Some(2));
        assert_eq!(r.lookup(a4("10.2.3.4")), Some(1));
        assert_eq!(r.lookup(a4("11.2.3.4")), None);
        r.insert(p4("0.0.0.0/0"), 9);
        assert_eq!(r.lookup(a4("11.2.3.4")), Some(9));
        assert_eq!(r.len(), 5);
    }

    #[test]
    fn insert_replaces_and_delete_restores() {
        let mut r = Radix::new();
        assert_eq!(r.insert(p4("192.168.0.0/16"), 1), None);
        assert_eq!(r.insert(p4("192.168.0.0/16"), 2), Some(1));
        // Diverging siblings make a glue node at 192.168.0.0/22.
        r.insert(p4("192.168.1.0/24"), 3);
        r.insert(p4("192.168.2.0/24"), 4);
        assert_eq!(r.lookup(a4("192.168.2.9")), Some(4));
        assert_eq!(r.delete(p4("192.168.2.0/24")), Some(4));
        assert_eq!(r.delete(p4("192.168.2.0/24")), None);
        assert_eq!(r.lookup(a4("192.168.2.9")), Some(2));
        assert_eq!(r.delete(p4("192.168.0.0/16")), Some(2));
        assert_eq!(r.lookup(a4("192.168.2.9")), None);
        assert_eq!(r.lookup(a4("192.168.1.9")), Some(3));
        assert_eq!(r.get(p4("192.168.1.0/24")), Some(3));
        assert_eq!(r.get(p4("192.168.0.0/22")), None);
        assert_eq!(r.routes(), vec![(p4("192.168.1.0/24"), 3)]);
        assert_eq!(r.delete(p4("192.168.1.0/24")), Some(3));
        assert!(r.is_empty());
        // Everything but the root went back to the free list.
        assert_eq!(r.free.len() + 1, r.nodes.len());
    }

    #[test]
    fn ipv6_host_and_default_routes() {
        let p = |s: &str, l| Prefix6::new(u128::from(s.parse::<std::net::Ipv6Addr>().unwrap()), l);
        let mut r = Radix::new();
        r.insert(p("::", 0), 1);
        r.insert(p("2001:db8::", 32), 2);
        r.insert(p("2001:db8::1", 128), 3);
        let a = |s: &str| u128::from(s.parse::<std::net::Ipv6Addr>().unwrap());
        assert_eq!(r.lookup(a("2001:db8::1")), Some(3));
        assert_eq!(r.lookup(a("2001:db8::2")), Some(2));
        assert_eq!(r.lookup(a("fe80::1")), Some(1));
    }
}
