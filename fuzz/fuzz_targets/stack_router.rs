//! One arbitrary frame into a router (`Stack` with forwarding on between two links,
//! static, multipath, blackhole, reject and prohibit routes of both families, router
//! advertisements on, an ipfw ruleset with states, resets, unreachables and a
//! dummynet pipe on every IP point) must never panic. Half the inputs get the router's MAC as
//! their destination so that they reach IP input and the forwarding path. Built
//! once and reused, so neighbour entries, path MTUs and redirects carry over.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Mutex;

struct Rig {
    sim: sim::Sim,
    port: Box<dyn dev::Queue>,
    mac: [u8; 6],
}

static RIG: Mutex<Option<Rig>> = Mutex::new(None);

fn rig() -> Rig {
    use dev::mem::WireConfig;
    let mut sim = sim::Sim::new(2);
    let h1 = sim.add_hub(WireConfig::default());
    let h2 = sim.add_hub(WireConfig { mtu: 1280, ..WireConfig::default() });
    let r = sim.add_host("r", 2);
    let b = sim.add_host("b", 1);
    let i1 = sim.connect(r, h1, "198.18.1.1/24");
    let i2 = sim.connect(r, h2, "198.18.2.1/24");
    sim.connect(b, h2, "198.18.2.2/24");
    let st = sim.host(r);
    st.add_address6(i1, "2001:2:1::1/64".parse().unwrap()).unwrap();
    st.add_address6(i2, "2001:2:2::1/64".parse().unwrap()).unwrap();
    for i in [i1, i2] {
        st.set_forwarding(i, true, true).unwrap();
    }
    st.set_router_advertisements(i1, true).unwrap();
    let p = |s: &str| s.parse::<route::IpPrefix>().unwrap();
    let a = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    st.add_route_via(p("198.19.0.0/16"), a("198.18.2.2")).unwrap();
    st.add_route_via(p("198.19.0.0/16"), a("198.18.2.3")).unwrap();
    st.add_route_via(p("198.18.9.0/24"), a("198.18.1.9")).unwrap();
    st.add_route_via(p("2001:2:9::/48"), a("2001:2:2::2")).unwrap();
    for (d, k) in [
        ("198.18.128.0/24", route::NhKind::Blackhole),
        ("198.18.129.0/24", route::NhKind::Reject),
        ("198.18.130.0/24", route::NhKind::Prohibit),
        ("2001:2:8::/48", route::NhKind::Reject),
    ] {
        st.add_route(route::RouteSpec::discard(p(d), k)).unwrap();
    }
    // A firewall on every IP point: states, resets, unreachables, a shaping pipe.
    let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), 2).unwrap();
    fw.load(
        "pipe 1 config bw 100Mbit/s delay 1ms queue 20
add 100 check-state
add 200 allow tcp from 198.18.1.0/24 to any setup keep-state
add 300 reset tcp from any to 198.18.2.0/24 22
add 400 unreach port udp from any to any 53
add 500 unreach6 port udp from any to any 54
add 600 pipe 1 udp from any to any 9 in
add 700 skipto 900 icmp from any to any
add 800 deny ip from any to any
add 900 allow ip from any to any",
    )
    .unwrap();
    fw.attach(st);
    let mac = st.interfaces()[0].mac.0;
    sim.run_for(dev::Duration::from_millis(1500));
    let port = sim.attach_raw(h1);
    Rig { sim, port, mac }
}

fuzz_target!(|data: &[u8]| {
    let mut g = RIG.lock().unwrap_or_else(|e| e.into_inner());
    let r = g.get_or_insert_with(rig);
    let mut frame = data.to_vec();
    if frame.len() >= 14 && frame[0] & 1 == 0 {
        frame[..6].copy_from_slice(&r.mac);
    }
    if let Ok(m) = mbuf::Mbuf::from_slice(&frame) {
        let now = r.sim.now();
        r.port.tx_burst(now, &mut vec![m]);
        r.sim.run_for(dev::Duration::from_micros(100));
    }
    // Drain what the router sent back to the fuzzer's port.
    let mut out = Vec::new();
    r.port.rx_burst(r.sim.now(), &mut out, 256);
});
