//! Routing messages: what a BSD routing socket (`route(4)`, `PF_ROUTE`) reads.
//!
//! Every change to the routing table, to interface addresses and to neighbour entries
//! is announced as an [`RtMsg`] to every subscriber. A subscriber has a bounded
//! queue; when it does not keep up, messages are dropped and counted (a routing
//! socket's `ENOBUFS`), never queued without limit. Sending costs one atomic load
//! when nobody listens.

use crate::nexthop::RtFlags;
use crate::IpPrefix;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Mutex;
use std::time::Duration;

/// The message types of `route(4)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RtmType {
    /// A route (or one path of a multipath route) was added; with `LLINFO`, a
    /// neighbour entry was resolved.
    Add,
    /// A route (or path) was deleted; with `LLINFO`, a neighbour entry went away.
    Delete,
    /// A route's gateway or flags changed; with `LLINFO`, a neighbour's address did.
    Change,
    /// The answer to a route lookup (`route get`).
    Get,
    /// A packet found no route.
    Miss,
    /// An address was added to an interface.
    NewAddr,
    /// An address was removed from an interface.
    DelAddr,
    /// A redirect changed a route.
    Redirect,
    /// An interface went up or down (`RtFlags::UP` in the message says which).
    IfInfo,
}

impl RtmType {
    /// The BSD name (`RTM_ADD`, …).
    pub fn name(self) -> &'static str {
        match self {
            RtmType::Add => "RTM_ADD",
            RtmType::Delete => "RTM_DELETE",
            RtmType::Change => "RTM_CHANGE",
            RtmType::Get => "RTM_GET",
            RtmType::Miss => "RTM_MISS",
            RtmType::NewAddr => "RTM_NEWADDR",
            RtmType::DelAddr => "RTM_DELADDR",
            RtmType::Redirect => "RTM_REDIRECT",
            RtmType::IfInfo => "RTM_IFINFO",
        }
    }
}

/// One routing message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RtMsg {
    pub kind: RtmType,
    /// Sequence number, increasing across all messages of one bus.
    pub seq: u64,
    /// The destination: a prefix for routes and addresses, a host prefix for a
    /// neighbour or a miss.
    pub dst: IpPrefix,
    pub gateway: Option<IpAddr>,
    /// The link-layer address of a neighbour message.
    pub lladdr: Option<[u8; 6]>,
    /// The interface's index (0, the first interface's, for discard routes too).
    pub ifindex: u32,
    pub flags: RtFlags,
}

impl fmt::Display for RtMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} seq {} {}", self.kind.name(), self.seq, self.dst)?;
        if let Some(g) = self.gateway {
            write!(f, " gateway {g}")?;
        }
        if let Some(m) = self.lladdr {
            write!(
                f,
                " lladdr {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                m[0], m[1], m[2], m[3], m[4], m[5]
            )?;
        }
        write!(f, " if {}", self.ifindex)?;
        write!(f, " flags <{}>", self.flags)
    }
}

/// Where messages are announced; cloned into every part of a stack that changes
/// routing state.
#[derive(Debug, Default)]
pub struct RtBus {
    subs: Mutex<Vec<SyncSender<RtMsg>>>,
    nsubs: AtomicUsize,
    seq: AtomicU64,
    dropped: AtomicU64,
}

impl RtBus {
    pub fn new() -> RtBus {
        RtBus::default()
    }

    /// Whether anyone listens (cheap: one atomic load).
    #[inline]
    pub fn has_subscribers(&self) -> bool {
        self.nsubs.load(Ordering::Relaxed) != 0
    }

    /// A new subscriber whose queue holds at most `capacity` messages.
    pub fn subscribe(&self, capacity: usize) -> RtSubscriber {
        let (tx, rx) = sync_channel(capacity.max(1));
        let mut subs = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        subs.push(tx);
        self.nsubs.store(subs.len(), Ordering::Relaxed);
        RtSubscriber { rx }
    }

    /// Announces a message to every subscriber (its `seq` is filled in). Full queues
    /// drop it and count it; gone subscribers are forgotten.
    pub fn send(
        &self,
        kind: RtmType,
        dst: IpPrefix,
        gateway: Option<IpAddr>,
        ifindex: u32,
        flags: RtFlags,
    ) {
        self.send_ll(kind, dst, gateway, None, ifindex, flags);
    }

    /// [`RtBus::send`] with a link-layer address.
    pub fn send_ll(
        &self,
        kind: RtmType,
        dst: IpPrefix,
        gateway: Option<IpAddr>,
        lladdr: Option<[u8; 6]>,
        ifindex: u32,
        flags: RtFlags,
    ) {
        if !self.has_subscribers() {
            return;
        }
        let mut subs = self.subs.lock().unwrap_or_else(|e| e.into_inner());
        let msg = RtMsg {
            kind,
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            dst,
            gateway,
            lladdr,
            ifindex,
            flags,
        };
        subs.retain(|s| match s.try_send(msg.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
        self.nsubs.store(subs.len(), Ordering::Relaxed);
    }

    /// Messages dropped because a subscriber's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// The reading end of a subscription (a routing socket). Dropping it unsubscribes.
#[derive(Debug)]
pub struct RtSubscriber {
    rx: Receiver<RtMsg>,
}

impl RtSubscriber {
    /// The next message if one is queued.
    pub fn try_recv(&self) -> Option<RtMsg> {
        self.rx.try_recv().ok()
    }

    /// The next message, waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<RtMsg> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Every message queued now.
    pub fn drain(&self) -> Vec<RtMsg> {
        self.rx.try_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> IpPrefix {
        "198.18.0.0/24".parse().unwrap()
    }

    #[test]
    fn subscribers_see_messages_in_order_and_full_queues_drop() {
        let bus = RtBus::new();
        bus.send(RtmType::Add, p(), None, 1, RtFlags::UP);
        let a = bus.subscribe(2);
        let b = bus.subscribe(8);
        for _ in 0..3 {
            bus.send(RtmType::Add, p(), None, 1, RtFlags::UP);
        }
        let got: Vec<u64> = a.drain().iter().map(|m| m.seq).collect();
        assert_eq!(got, vec![1, 2], "sequence counts only sent messages");
        assert_eq!(b.drain().len(), 3);
        assert_eq!(bus.dropped(), 1);
        drop(a);
        bus.send(RtmType::Delete, p(), None, 1, RtFlags::UP);
        assert!(bus.has_subscribers());
        drop(b);
        bus.send(RtmType::Delete, p(), None, 1, RtFlags::UP);
        assert!(!bus.has_subscribers());
    }

    #[test]
    fn messages_print_as_route_monitor_does() {
        let bus = RtBus::new();
        let s = bus.subscribe(4);
        bus.send_ll(
            RtmType::Add,
            "198.18.0.1/32".parse().unwrap(),
            None,
            Some([2, 0, 0, 0, 0, 1]),
            2,
            RtFlags::UP | RtFlags::HOST | RtFlags::LLINFO,
        );
        assert_eq!(
            s.try_recv().unwrap().to_string(),
            "RTM_ADD seq 1 198.18.0.1/32 lladdr 02:00:00:00:00:01 if 2 flags <UHL>"
        );
    }
}
