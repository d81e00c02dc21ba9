//! IPv6 input with a head start: a valid Ethernet and IPv6 header (to one of host b's
//! addresses or groups, chosen by the input, hop limit 255 or 64) around an arbitrary
//! extension-header chain and upper layer, into a stack with IPv6 on and duplicate
//! address detection done. Must never panic; the stack is reused across inputs, so
//! neighbour entries left by earlier inputs are exercised too.
#![no_main]

use mpstack_fuzz::Input;
use libfuzzer_sys::fuzz_target;
use std::net::Ipv6Addr;
use std::sync::Mutex;

struct Rig {
    sim: sim::Sim,
    port: Box<dyn dev::Queue>,
    mac: wire::EthernetAddress,
}

static RIG: Mutex<Option<Rig>> = Mutex::new(None);

fn rig() -> Rig {
    let mut sim = sim::Sim::new(1);
    let hub = sim.add_hub(dev::mem::WireConfig::default());
    let b = sim.add_host("b", 1);
    sim.connect(b, hub, "198.18.0.2/24");
    sim.host(b)
        .add_address6(net::IfIndex(0), "2001:2::2/64".parse().unwrap())
        .unwrap();
    sim.run_for(dev::Duration::from_millis(1500));
    let mac = sim.host(b).interfaces()[0].mac;
    let port = sim.attach_raw(hub);
    Rig { sim, port, mac }
}

fuzz_target!(|data: &[u8]| {
    let mut g = RIG.lock().unwrap_or_else(|e| e.into_inner());
    let r = g.get_or_insert_with(rig);
    let mut inp = Input(data);
    let sel = inp.u8();
    let next = inp.u8();
    let dst: Ipv6Addr = match sel % 4 {
        0 => "2001:2::2".parse().unwrap(),
        1 => "ff02::1".parse().unwrap(),
        2 => net::iface::solicited_node("2001:2::2".parse().unwrap()),
        _ => net::iface::solicited_node(
            net::iface::Inet6Addr::link_local(r.mac).addr,
        ),
    };
    let src: Ipv6Addr = if sel & 0x10 != 0 {
        Ipv6Addr::UNSPECIFIED
    } else {
        "2001:2::99".parse().unwrap()
    };
    let payload = inp.0;
    let dst_mac = if dst.is_multicast() {
        let o = dst.octets();
        wire::EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
    } else {
        r.mac
    };
    let mut v = vec![0u8; 54];
    v[..6].copy_from_slice(&dst_mac.0);
    v[6..12].copy_from_slice(&[0x02, 0xee, 0, 0, 0, 0x99]);
    v[12..14].copy_from_slice(&[0x86, 0xdd]);
    v[14] = 0x60;
    let plen = (payload.len() as u16).wrapping_add(u16::from(sel >> 6));
    v[18..20].copy_from_slice(&plen.to_be_bytes());
    v[20] = next;
    v[21] = if sel & 0x20 != 0 { 255 } else { 64 };
    v[22..38].copy_from_slice(&src.octets());
    v[38..54].copy_from_slice(&dst.octets());
    v.extend_from_slice(payload);
    if let Ok(m) = mbuf::Mbuf::from_slice(&v) {
        let now = r.sim.now();
        r.port.tx_burst(now, &mut vec![m]);
        r.sim.run_for(dev::Duration::from_micros(100));
        // Drain what the node sent back.
        let mut out = Vec::new();
        let now = r.sim.now();
        r.port.rx_burst(now, &mut out, 1024);
    }
});
