//! `mpstack demo`'s router scenario: what it prints must be what happened, and the
//! same seed must give the same run.

use sim::demo::router::{self, RouterConfig, CHARLIE, PIPE_BW_MBIT, PIPE_DELAY_MS, ROUTER_LAN1};

fn check(r: &router::RouterReport, what: &str) {
    assert_eq!(r.received, 2_000_000, "{what}");
    assert!(
        r.intact,
        "{what}: the bytes charlie read are the bytes alpha wrote"
    );
    assert_eq!(
        r.telnet,
        Some(std::io::ErrorKind::ConnectionRefused),
        "{what}: the firewall's reset refused bravo's telnet"
    );
    assert!(
        r.udp6_echoed,
        "{what}: UDP over IPv6 across the router and back"
    );
    let hops: Vec<_> = r
        .traceroute
        .iter()
        .map(|h| (h.ttl, h.from, h.icmp))
        .collect();
    assert_eq!(
        hops,
        [(1, ROUTER_LAN1, (11, 0)), (2, CHARLIE, (3, 3))],
        "{what}: TTL 1 is answered by the router's time exceeded, TTL 2 by charlie's port unreachable"
    );
    // The second hop is past both pipes: 2 x 20 ms and a little.
    assert!(r.traceroute[1].rtt.as_secs_f64() > 2.0 * PIPE_DELAY_MS as f64 / 1e3);
    // The constants the checks use are the ruleset's.
    let pipes = r.fw.pipes();
    assert_eq!(pipes.len(), 2);
    for (_, c, _) in &pipes {
        assert_eq!(c.delay, dev::Duration::from_millis(PIPE_DELAY_MS));
        assert_eq!(c.bandwidth, PIPE_BW_MBIT * 1_000_000);
    }
    let d = r.pipe_delay().expect("both pings answered").as_secs_f64();
    let want = PIPE_DELAY_MS as f64 / 1e3;
    assert!(
        (d - want).abs() / want < 0.05,
        "{what}: pipe delay measured {d} s, set {want} s"
    );
    // Through a 10 Mbit/s pipe: at most its rate, and not far below it.
    let g = r.goodput_mbit();
    assert!(g < 10.0 && g > 5.0, "{what}: goodput {g} Mbit/s");
    let arp = r
        .frames
        .iter()
        .any(|(_, f)| sim::describe(&f.frame).starts_with("ARP, Request"));
    let nd = r
        .frames
        .iter()
        .any(|(_, f)| sim::describe(&f.frame).contains("neighbor solicitation"));
    assert!(arp && nd, "{what}: ARP and ND on the wire");
    assert!(
        r.frames.iter().all(|(l, _)| *l == "lan1" || *l == "lan2"),
        "{what}: every frame is put on its link"
    );
    assert!(r.ok(), "{what}");
}

#[test]
fn router_demo_transfers_resets_traces_and_delays_as_configured() {
    for workers in [1, 2] {
        let r = router::run(&RouterConfig {
            workers,
            ..RouterConfig::default()
        })
        .unwrap();
        check(&r, &format!("{workers} workers"));
    }
    let r = router::run(&RouterConfig {
        seed: 7,
        ..RouterConfig::default()
    })
    .unwrap();
    check(&r, "seed 7");
}

#[test]
fn router_demo_is_the_same_for_the_same_seed() {
    let lines = |seed| {
        let r = router::run(&RouterConfig {
            seed,
            ..RouterConfig::default()
        })
        .unwrap();
        let mut v: Vec<String> = r
            .frames
            .iter()
            .map(|(l, f)| format!("{} {:?}", router::frame_line(l, f), f.frame))
            .collect();
        v.push(format!("{r:?}"));
        v.push(r.fw.show());
        v
    };
    let a = lines(3);
    assert_eq!(a, lines(3), "same seed, same frames, same results");
    assert_ne!(
        a,
        lines(4),
        "another seed, other addresses and sequence numbers"
    );
}

#[test]
fn the_demo_describes_any_cut_or_corrupted_frame_without_panicking() {
    let r = router::run(&RouterConfig {
        transfer_bytes: 10_000,
        ..RouterConfig::default()
    })
    .unwrap();
    assert!(r.ok());
    let mut rng = dev::rng::Rng::new(5);
    for (_, f) in &r.frames {
        for n in 0..f.frame.len().min(200) {
            let _ = sim::describe(&f.frame[..n]);
        }
        for _ in 0..20 {
            let mut g = f.frame.clone();
            let i = rng.below(g.len() as u64) as usize;
            g[i] = rng.next_u32() as u8;
            let _ = sim::describe(&g);
        }
    }
}
