//! Arbitrary frames into a bridge (`Stack` with a bridge of three members and a
//! VLAN of the third, another VLAN of it with an address, the spanning tree on, an
//! address on the bridge itself, ipfw at layer 2, a small address table): no panic,
//! no hang, and the table never holds more than its bound. The first byte picks the member the frame arrives on; a set low bit of
//! the second makes the frame a BPDU (the spanning tree's group address and LLC
//! header in front of the rest), so the tree is fed too. Built once and reused,
//! so learned addresses and the tree's state carry over.
#![no_main]

use libfuzzer_sys::fuzz_target;
use net::link::bridge::{BridgeParams, MemberFlags, StpParams};
use std::sync::Mutex;

const MAX_ADDRS: usize = 64;

struct Rig {
    sim: sim::Sim,
    ports: Vec<Box<dyn dev::Queue>>,
    bridge: net::IfIndex,
    br: sim::HostId,
}

static RIG: Mutex<Option<Rig>> = Mutex::new(None);

fn rig() -> Rig {
    use dev::mem::WireConfig;
    let mut sim = sim::Sim::new(3);
    let br = sim.add_host("br", 2);
    let hubs: Vec<_> = (0..3).map(|_| sim.add_hub(WireConfig::default())).collect();
    let members: Vec<_> = hubs
        .iter()
        .enumerate()
        .map(|(k, &h)| sim.connect_named(br, h, "", &format!("em{k}")))
        .collect();
    let h = sim.add_host("h", 1);
    sim.connect(h, hubs[0], "198.18.0.1/24");
    let st = sim.host(br);
    let p = BridgeParams {
        max_addrs: MAX_ADDRS,
        stp: Some(StpParams::default()),
        ..BridgeParams::default()
    };
    let bridge = st.add_bridge("bridge0", p).unwrap();
    // The third member is also a trunk: its VLAN 10 is a member too, and its VLAN
    // 20 a host's interface of its own.
    let v10 = st.add_vlan("vlan10", members[2], 10).unwrap();
    let v20 = st.add_vlan("vlan20", members[2], 20).unwrap();
    st.add_address(v20, "198.18.20.254/24".parse().unwrap()).unwrap();
    for m in members.into_iter().chain([v10]) {
        st.bridge_add_member(bridge, m, MemberFlags::default()).unwrap();
    }
    st.add_address(bridge, "198.18.0.254/24".parse().unwrap()).unwrap();
    let fw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), 2).unwrap();
    fw.load(
        "add 100 deny ip from any to any mac-type 34997 layer2
add 200 allow ip from any to any",
    )
    .unwrap();
    fw.attach_layer2(st);
    // Past listening and learning: the members forward.
    sim.run_for(dev::Duration::from_secs(35));
    let ports = hubs.iter().map(|&h| sim.attach_raw(h)).collect();
    Rig {
        sim,
        ports,
        bridge,
        br,
    }
}

fuzz_target!(|data: &[u8]| {
    let mut g = RIG.lock().unwrap_or_else(|e| e.into_inner());
    let r = g.get_or_insert_with(rig);
    let [port, kind, rest @ ..] = data else {
        return;
    };
    let mut frame = Vec::with_capacity(rest.len() + 17);
    if kind & 1 == 1 {
        frame.extend_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0, 0x02, 0, 0, 0, 0, 0x09]);
        frame.extend_from_slice(&((rest.len() + 3).min(1500) as u16).to_be_bytes());
        frame.extend_from_slice(&[0x42, 0x42, 0x03]);
    }
    frame.extend_from_slice(rest);
    let k = *port as usize % r.ports.len();
    if let Ok(m) = mbuf::Mbuf::from_slice(&frame) {
        let now = r.sim.now();
        r.ports[k].tx_burst(now, &mut vec![m]);
        r.sim.run_for(dev::Duration::from_micros(200));
    }
    for p in r.ports.iter_mut() {
        let mut out = Vec::new();
        p.rx_burst(r.sim.now(), &mut out, 256);
    }
    let bc = r.sim.host(r.br).bridge(r.bridge).unwrap();
    assert!(bc.br.rt.stats().entries <= MAX_ADDRS);
});
