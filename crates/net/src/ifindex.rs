//! An interface's index: how every family, and the packet-filter hooks below them,
//! name an interface. Its [`Ifnet`](crate::link::iface::Ifnet) is the link layer's.

/// An interface's index in its stack (`if_index`), from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IfIndex(pub u16);

impl IfIndex {
    #[inline]
    pub fn get(self) -> usize {
        self.0 as usize
    }
}
