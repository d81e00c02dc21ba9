//! ARP (RFC 826): the IPv4 face of the neighbour table ([`crate::link::lle`]).
//!
//! ARP input and requests live in `ether` (`in_arpinput`, `arprequest`);
//! this module names the IPv4 instance of the table and holds its tests.

pub use crate::link::lle::{Inet, LleParams as ArpParams, LleState, Resolve};
use crate::link::lle::{LlTable, LleEntry, LleOutput, LleSnapshot};
use std::net::Ipv4Addr;

/// The IPv4 neighbour table of one interface.
pub type ArpTable = LlTable<Inet>;
/// One entry as `arp -a` shows it.
pub type ArpEntry = LleEntry<Ipv4Addr>;
/// What the data path reads.
pub type ArpSnapshot = LleSnapshot<Ipv4Addr>;
/// A frame the table wants sent.
pub type ArpOutput = LleOutput<Ipv4Addr>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Stats;
    use dev::{Duration, Instant};
    use mbuf::Mbuf;
    use wire::EthernetAddress;

    fn ip(n: u8) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, 0, n)
    }
    const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 9]);

    fn pkt() -> Mbuf {
        Mbuf::from_slice(&[0u8; 60]).unwrap()
    }

    #[test]
    fn miss_holds_then_answer_releases() {
        let t = ArpTable::new(ArpParams::default());
        let mut s = Stats::default();
        let mut out = Vec::new();
        let now = Instant::from_secs(1);
        assert!(t.snapshot().load().lookup(ip(2), now).is_none());
        assert!(matches!(
            t.resolve_slow(now, ip(2), pkt(), &mut s, &mut out),
            Resolve::Held
        ));
        assert!(matches!(
            t.resolve_slow(now, ip(2), pkt(), &mut s, &mut out),
            Resolve::Held
        ));
        assert_eq!(out.len(), 1, "one request for two packets");
        out.clear();
        t.input(now, ip(2), MAC, true, &mut s, &mut out);
        assert_eq!(
            out.iter()
                .filter(|o| matches!(o, ArpOutput::Packet { .. }))
                .count(),
            2
        );
        assert_eq!(t.snapshot().load().lookup(ip(2), now), Some(MAC));
        // After the reachable time the data path no longer trusts the snapshot.
        let later = now + Duration::from_secs(31);
        assert_eq!(t.snapshot().load().lookup(ip(2), later), None);
    }

    #[test]
    fn incomplete_gives_up_after_max_tries_and_counts_held() {
        let t = ArpTable::new(ArpParams::default());
        let mut s = Stats::default();
        let mut out = Vec::new();
        let mut now = Instant::from_secs(1);
        let _ = t.resolve_slow(now, ip(3), pkt(), &mut s, &mut out);
        for _ in 0..10 {
            now += Duration::from_secs(1);
            t.timer(now, &mut s, &mut out);
        }
        assert_eq!(s.arp.txrequests, 5);
        assert_eq!(s.arp.timeouts, 1);
        assert_eq!(s.arp.dropped, 1);
        assert!(t.is_empty());
        assert_eq!(t.poll_at(), None);
    }

    #[test]
    fn nud_reachable_stale_delay_probe() {
        let t = ArpTable::new(ArpParams::default());
        let mut s = Stats::default();
        let mut out = Vec::new();
        let mut now = Instant::from_secs(1);
        t.input(now, ip(4), MAC, true, &mut s, &mut out);
        now += Duration::from_secs(31);
        t.timer(now, &mut s, &mut out);
        assert_eq!(t.entries()[0].state, LleState::Stale);
        // Use moves it to DELAY and sends at once.
        assert!(
            matches!(t.resolve_slow(now, ip(4), pkt(), &mut s, &mut out), Resolve::Now(_, m) if m == MAC)
        );
        assert_eq!(t.entries()[0].state, LleState::Delay);
        now += Duration::from_secs(5);
        t.timer(now, &mut s, &mut out);
        assert_eq!(t.entries()[0].state, LleState::Probe);
        assert!(matches!(
            out.last(),
            Some(ArpOutput::Request {
                unicast: Some(_),
                ..
            })
        ));
        // An answer confirms it.
        t.input(now, ip(4), MAC, true, &mut s, &mut out);
        assert_eq!(t.entries()[0].state, LleState::Reachable);
    }

    #[test]
    fn bounded_with_eviction() {
        let p = ArpParams {
            max_entries: 8,
            ..ArpParams::default()
        };
        let t = ArpTable::new(p);
        let mut s = Stats::default();
        let mut out = Vec::new();
        for i in 0..100u8 {
            let _ = t.resolve_slow(Instant::from_secs(i as u64), ip(i), pkt(), &mut s, &mut out);
        }
        assert_eq!(t.len(), 8);
        assert_eq!(s.arp.evicted, 92);
        assert_eq!(s.arp.dropped, 92);
    }

    #[test]
    fn unsolicited_sender_creates_nothing() {
        let t = ArpTable::new(ArpParams::default());
        let mut s = Stats::default();
        let mut out = Vec::new();
        t.input(Instant::ZERO, ip(9), MAC, false, &mut s, &mut out);
        assert!(t.is_empty());
    }
}
