//! One arbitrary frame into a configured stack never panics, and the stack keeps
//! answering afterwards. Frames are random bytes and valid frames with random damage.

use dev::mem::WireConfig;
use dev::{Duration, Queue};
use proptest::prelude::*;
use sim::Sim;
use std::net::Ipv4Addr;
use wire::EthernetAddress;

struct Rig {
    sim: Sim,
    port: Box<dyn Queue>,
    b_mac: EthernetAddress,
    a: sim::HostId,
}

fn rig() -> Rig {
    let mut sim = Sim::new(3);
    let hub = sim.add_hub(WireConfig::default());
    let a = sim.add_host("a", 1);
    let b = sim.add_host("b", 2);
    sim.connect(a, hub, "198.18.0.1/24");
    sim.connect(b, hub, "198.18.0.2/24");
    let _keep = sim
        .host(b)
        .udp_bind("0.0.0.0:7".parse::<std::net::SocketAddr>().unwrap())
        .unwrap();
    std::mem::forget(_keep);
    let port = sim.attach_raw(hub);
    let b_mac = sim.host(b).interfaces()[0].mac;
    Rig {
        sim,
        port,
        b_mac,
        a,
    }
}

fn templates(b_mac: EthernetAddress) -> Vec<Vec<u8>> {
    let us = (b_mac, Ipv4Addr::new(198, 18, 0, 2));
    let peer = (
        EthernetAddress([2, 0, 0, 0, 0, 0x77]),
        Ipv4Addr::new(198, 18, 0, 77),
    );
    sim::malformed::frames(sim::malformed::KINDS, us, peer, 1)
        .into_iter()
        .map(|f| f.frame)
        .collect()
}

fn inject(r: &mut Rig, frame: &[u8]) {
    let now = r.sim.now();
    if let Ok(m) = mbuf::Mbuf::from_slice(frame) {
        r.port.tx_burst(now, &mut vec![m]);
    }
    r.sim.run_for(Duration::from_micros(50));
}

fn still_answers(r: &mut Rig) {
    let p = r.sim.host(r.a).ping_socket(0).unwrap();
    p.set_nonblocking(true).unwrap();
    p.send_echo(Ipv4Addr::new(198, 18, 0, 2), 1, b"alive?")
        .unwrap();
    r.sim.run_for(Duration::from_secs(2));
    let mut b = [0u8; 16];
    assert!(p.recv_reply(&mut b).is_ok(), "the stack stopped answering");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..1600), 1..8)) {
        let mut r = rig();
        for f in &frames {
            inject(&mut r, f);
        }
        still_answers(&mut r);
    }

    #[test]
    fn damaged_valid_frames_never_panic(
        which in 0usize..sim::malformed::KINDS,
        flips in proptest::collection::vec((0usize..1600, any::<u8>()), 1..12),
        cut in 0usize..1600,
        to_us in any::<bool>(),
    ) {
        let mut r = rig();
        let mut f = templates(r.b_mac)[which].clone();
        if to_us && f.len() >= 6 {
            f[..6].copy_from_slice(&r.b_mac.0);
        }
        for (i, v) in flips {
            if !f.is_empty() {
                let n = f.len();
                f[i % n] ^= v;
            }
        }
        f.truncate(cut.max(1));
        inject(&mut r, &f);
        still_answers(&mut r);
    }
}
