//! Arbitrary encapsulated packets into a router with tunnels of every kind (gif and
//! GRE, with and without a key, IPv4 and IPv6 outside) must never panic, hang or
//! grow without bound. The first byte picks the outer family and protocol (4, 41
//! or 47) and, for GRE, whether a well-formed header with one of the configured
//! keys goes in front; the rest is the payload, from a tunnel's far end to the
//! router, so it reaches the tunnels' input, and what they take goes on through
//! the tunnel's interface (forwarding, local delivery, ipfw) and back out through
//! the tunnels. Built once and reused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use net::tunnel::{TunnelKind, TunnelParams};
use std::sync::Mutex;

struct Rig {
    sim: sim::Sim,
    port: Box<dyn dev::Queue>,
    mac: [u8; 6],
}

static RIG: Mutex<Option<Rig>> = Mutex::new(None);

const FAR4: [u8; 4] = [198, 18, 1, 9];
const OURS4: [u8; 4] = [198, 18, 1, 1];
const FAR6: [u8; 16] = [0x20, 0x01, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
const OURS6: [u8; 16] = [0x20, 0x01, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];

fn rig() -> Rig {
    use dev::mem::WireConfig;
    let mut sim = sim::Sim::new(3);
    let h1 = sim.add_hub(WireConfig::default());
    let h2 = sim.add_hub(WireConfig::default());
    let r = sim.add_host("r", 2);
    let b = sim.add_host("b", 1);
    let i1 = sim.connect(r, h1, "198.18.1.1/24");
    let i2 = sim.connect(r, h2, "198.18.2.1/24");
    sim.connect(b, h2, "198.18.2.2/24");
    let st = sim.host(r);
    st.add_address6(i1, "2001:2:1::1/64".parse().unwrap()).unwrap();
    st.add_address6(i2, "2001:2:2::1/64".parse().unwrap()).unwrap();
    let a = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let kinds = [
        (TunnelKind::Gif, false),
        (TunnelKind::Gif, true),
        (TunnelKind::Gre { key: None }, false),
        (TunnelKind::Gre { key: Some(7) }, false),
        (TunnelKind::Gre { key: None }, true),
    ];
    for (k, (kind, v6)) in kinds.into_iter().enumerate() {
        let (src, dst) = if v6 {
            (a("2001:2:1::1"), a("2001:2:1::9"))
        } else {
            (a("198.18.1.1"), a("198.18.1.9"))
        };
        let p = TunnelParams {
            kind,
            src,
            dst,
            mtu: None,
        };
        let t = st.add_tunnel(&format!("tun{k}"), p).unwrap();
        st.add_address(t, format!("198.18.{}.1/30", 100 + k).parse().unwrap())
            .unwrap();
        st.add_address6(t, format!("2001:2:{}::1/64", 100 + k).parse().unwrap())
            .unwrap();
    }
    for i in st.interfaces() {
        st.set_forwarding(i.index, true, true).unwrap();
    }
    let p = |s: &str| s.parse::<route::IpPrefix>().unwrap();
    // Through a tunnel, and an outer destination routed through one (refused).
    st.add_route_via(p("198.19.0.0/16"), a("198.18.100.2")).unwrap();
    st.add_route_via(p("2001:2:9::/48"), a("2001:2:102::2")).unwrap();
    st.add_route_via(p("198.18.50.0/24"), a("198.18.101.2")).unwrap();
    let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), 2).unwrap();
    fw.load(
        "add 100 deny tcp from any to any 23 via tun0
add 200 allow ip from any to any",
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
    let [sel, rest @ ..] = data else {
        return;
    };
    let proto = match sel & 3 {
        0 => 4u8,
        1 => 41,
        _ => 47,
    };
    let v6 = sel & 4 != 0;
    let mut payload = Vec::with_capacity(rest.len() + 8);
    if proto == 47 && sel & 8 != 0 {
        // A well-formed GRE header (no key, or key 7) before the fuzzer's bytes.
        let ty: [u8; 2] = if sel & 16 != 0 { [0x86, 0xdd] } else { [0x08, 0x00] };
        if sel & 32 != 0 {
            payload.extend_from_slice(&[0x20, 0, ty[0], ty[1], 0, 0, 0, 7]);
        } else {
            payload.extend_from_slice(&[0, 0, ty[0], ty[1]]);
        }
    }
    payload.extend_from_slice(rest);
    let mut f = Vec::with_capacity(payload.len() + 54);
    f.extend_from_slice(&r.mac);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x09]);
    if v6 {
        let Ok(plen) = u16::try_from(payload.len()) else {
            return;
        };
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&plen.to_be_bytes());
        f.extend_from_slice(&[proto, 64]);
        f.extend_from_slice(&FAR6);
        f.extend_from_slice(&OURS6);
    } else {
        let Ok(total) = u16::try_from(payload.len() + 20) else {
            return;
        };
        let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip.extend_from_slice(&FAR4);
        ip.extend_from_slice(&OURS4);
        let sum = !wire::checksum::data(&ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&ip);
    }
    f.extend_from_slice(&payload);
    if let Ok(m) = mbuf::Mbuf::from_slice(&f) {
        let now = r.sim.now();
        r.port.tx_burst(now, &mut vec![m]);
        r.sim.run_for(dev::Duration::from_micros(100));
    }
    let mut out = Vec::new();
    r.port.rx_burst(r.sim.now(), &mut out, 256);
});
