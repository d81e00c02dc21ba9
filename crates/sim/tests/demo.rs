//! `mpstack demo`'s router scenario: what it shows must be what happened.

use sim::demo::router::{self, RouterConfig, CHARLIE, PIPE_DELAY_MS, ROUTER_LAN1};

#[test]
fn router_demo_transfers_resets_traces_and_delays_as_configured() {
    let r = router::run(&RouterConfig::default()).unwrap();
    eprintln!("{r:#?}");
    assert_eq!(r.received, 2_000_000);
    assert!(r.intact, "the bytes charlie read are the bytes alpha wrote");
    assert_eq!(
        r.telnet,
        Some(std::io::ErrorKind::ConnectionRefused),
        "the firewall's reset refused bravo's telnet"
    );
    assert!(r.udp6_echoed, "UDP over IPv6 across the router and back");
    let hops: Vec<_> = r
        .traceroute
        .iter()
        .map(|h| (h.ttl, h.from, h.icmp))
        .collect();
    assert_eq!(
        hops,
        [(1, ROUTER_LAN1, (11, 0)), (2, CHARLIE, (3, 3))],
        "TTL 1: the router's time exceeded; TTL 2: charlie's port unreachable"
    );
    let d = r.pipe_delay().unwrap().as_secs_f64();
    let want = PIPE_DELAY_MS as f64 / 1e3;
    assert!(
        (d - want).abs() / want < 0.05,
        "pipe delay measured {d}, set {want}"
    );
    assert!(r.ok());
}
