//! One arbitrary frame into a configured `Stack` (two workers, IPv4 and IPv6 addresses,
//! a UDP socket, a resolved neighbour) must never panic. The stack is built once and reused,
//! so state left by earlier inputs (neighbour entries, queued datagrams) is exercised too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Mutex;

struct Rig {
    sim: sim::Sim,
    port: Box<dyn dev::Queue>,
    _sock: net::UdpSocket,
}

static RIG: Mutex<Option<Rig>> = Mutex::new(None);

fn rig() -> Rig {
    let mut sim = sim::Sim::new(1);
    let hub = sim.add_hub(dev::mem::WireConfig::default());
    let a = sim.add_host("a", 1);
    let b = sim.add_host("b", 2);
    sim.connect(a, hub, "198.18.0.1/24");
    sim.connect(b, hub, "198.18.0.2/24");
    sim.host(b)
        .add_address6(net::IfIndex(0), "2001:2::2/64".parse().unwrap())
        .unwrap();
    let sock = sim.host(b).udp_bind("0.0.0.0:7".parse::<std::net::SocketAddr>().unwrap()).unwrap();
    sock.set_nonblocking(true).unwrap();
    let p = sim.host(a).ping_socket(0).unwrap();
    p.send_echo("198.18.0.2".parse().unwrap(), 1, b"warm").unwrap();
    // Past duplicate address detection, so IPv6 input takes traffic.
    sim.run_for(dev::Duration::from_millis(1500));
    let port = sim.attach_raw(hub);
    Rig { sim, port, _sock: sock }
}

fuzz_target!(|data: &[u8]| {
    let mut g = RIG.lock().unwrap_or_else(|e| e.into_inner());
    let r = g.get_or_insert_with(rig);
    if let Ok(m) = mbuf::Mbuf::from_slice(data) {
        let now = r.sim.now();
        r.port.tx_burst(now, &mut vec![m]);
        r.sim.run_for(dev::Duration::from_micros(100));
    }
    // Keep the socket's queue from filling forever.
    let mut buf = [0u8; 2048];
    while r._sock.recv_from(&mut buf).is_ok() {}
});
