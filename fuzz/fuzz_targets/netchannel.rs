//! Netchannels: arbitrary classifier expressions must parse or be refused, never
//! panic; arbitrary bytes sent raw through a netchannel (an application's packets:
//! any version, any lengths, any transport) must go out or be dropped and counted,
//! never panic; and whatever they make arrive at a catch-all netchannel on the peer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Mutex;

struct Rig {
    sim: sim::Sim,
    out: net::NetChannel,
    sink: net::NetChannel,
}

static RIG: Mutex<Option<Rig>> = Mutex::new(None);

fn rig() -> Rig {
    let mut sim = sim::Sim::new(1);
    let hub = sim.add_hub(dev::mem::WireConfig::default());
    let a = sim.add_host("a", 1);
    let b = sim.add_host("b", 2);
    let ia = sim.connect(a, hub, "198.18.0.1/24");
    let ib = sim.connect(b, hub, "198.18.0.2/24");
    sim.host(a)
        .add_address6(ia, "2001:2::1/64".parse().unwrap())
        .unwrap();
    sim.host(b)
        .add_address6(ib, "2001:2::2/64".parse().unwrap())
        .unwrap();
    let out = sim
        .host(a)
        .netchannel(net::netchan::Classifier::tcp().local_port(1))
        .unwrap();
    let sink = sim.host(b).netchannel(net::netchan::Classifier::any()).unwrap();
    sink.set_nonblocking(true).unwrap();
    sim.run_for(dev::Duration::from_millis(1500));
    Rig { sim, out, sink }
}

fuzz_target!(|data: &[u8]| {
    let Some((&what, rest)) = data.split_first() else {
        return;
    };
    if what & 1 == 0 {
        if let Ok(s) = std::str::from_utf8(rest) {
            if let Ok(c) = net::netchan::Classifier::parse(s) {
                // What it prints reads back as itself.
                assert_eq!(net::netchan::Classifier::parse(&c.to_string()), Ok(c));
            }
        }
        return;
    }
    let mut g = RIG.lock().unwrap_or_else(|e| e.into_inner());
    let r = g.get_or_insert_with(rig);
    let _ = r.out.send(rest);
    r.sim.run_for(dev::Duration::from_micros(200));
    while r.sink.try_recv().is_some() {}
});
