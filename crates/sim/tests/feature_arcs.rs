//! Feature arcs per interface (issue 47): a hook added to one interface's arc sees
//! that interface's packets only, in its order among the others; a hook every
//! interface runs (ipfw) can be turned off on one interface and back on at run time;
//! out arcs where interfaces differ send each packet through its own interface's
//! hooks. In virtual time, one and two workers.

use dev::Duration;
use net::ipfw::Ipfw;
use net::{Dir, IfIndex, PfilPoint};
use sim::{HostId, Sim};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// A hook that writes its name into a shared log for each packet it passes (or
/// drops, when told to).
#[derive(Debug)]
struct Mark {
    name: &'static str,
    log: Arc<Mutex<Vec<&'static str>>>,
    drop: bool,
}

impl net::PfilHook for Mark {
    fn name(&self) -> &str {
        self.name
    }
    fn filter(&self, m: mbuf::Mbuf, _cx: &net::PfilCtx<'_>) -> net::Verdict {
        self.log.lock().unwrap().push(self.name);
        if self.drop {
            net::Verdict::Dropped
        } else {
            net::Verdict::Pass(m)
        }
    }
}

fn mark(name: &'static str, log: &Arc<Mutex<Vec<&'static str>>>) -> Arc<Mark> {
    Arc::new(Mark {
        name,
        log: log.clone(),
        drop: false,
    })
}

/// a — r — b, r's two interfaces (to a, to b).
fn lab(workers: usize) -> (Sim, HostId, HostId, HostId, IfIndex, IfIndex) {
    let (mut s, a, r, b) = sim::routed(48, workers);
    s.run_for(Duration::from_millis(100));
    let ifs = s.host(r).interfaces();
    (s, a, r, b, ifs[0].index, ifs[1].index)
}

/// One datagram `from` → `to`; whether it arrived.
fn udp(s: &mut Sim, from: HostId, to_host: HostId, to: SocketAddr) -> bool {
    let sk = s.host(to_host).udp_bind(to).unwrap();
    sk.set_nonblocking(true).unwrap();
    let cli = s
        .host(from)
        .udp_bind("0.0.0.0:0".parse::<SocketAddr>().unwrap())
        .unwrap();
    cli.send_to(b"arc", to).unwrap();
    s.run_for(Duration::from_millis(200));
    let mut buf = [0u8; 16];
    sk.recv_from(&mut buf).is_ok()
}

const B: &str = "198.18.2.2:6000";
const A: &str = "198.18.1.2:6001";

#[test]
fn a_hook_on_one_interface_sees_only_that_interfaces_packets() {
    for workers in [1, 2] {
        let (mut s, a, r, b, ra, _rb) = lab(workers);
        let log = Arc::new(Mutex::new(Vec::new()));
        s.host(r)
            .add_if_hook(ra, PfilPoint::Inet, Dir::In, 0, mark("in-a", &log))
            .unwrap();
        assert_eq!(
            s.host(r).if_hooks(ra),
            vec![("inet-in", vec!["in-a".to_string()])]
        );
        assert!(s.host(r).if_hooks(_rb).is_empty());
        assert!(udp(&mut s, a, b, B.parse().unwrap()), "workers={workers}");
        let seen = log.lock().unwrap().len();
        assert!(seen >= 1, "workers={workers}: a's datagram met in-a");
        // b → a arrives on r's other interface: in-a does not see it.
        assert!(udp(&mut s, b, a, A.parse().unwrap()), "workers={workers}");
        assert_eq!(log.lock().unwrap().len(), seen, "workers={workers}");
        // No interface index beyond r's.
        assert!(s
            .host(r)
            .add_if_hook(IfIndex(9), PfilPoint::Inet, Dir::In, 0, mark("x", &log))
            .is_err());
    }
}

#[test]
fn layer_2_arcs_of_one_interface_see_its_frames_only() {
    let (mut s, a, r, b, ra, rb) = lab(1);
    let log_in = Arc::new(Mutex::new(Vec::new()));
    let log_out = Arc::new(Mutex::new(Vec::new()));
    let h = s.host(r);
    h.add_if_hook(rb, PfilPoint::Ether, Dir::In, 0, mark("l2-in-b", &log_in))
        .unwrap();
    h.add_if_hook(
        ra,
        PfilPoint::Ether,
        Dir::Out,
        0,
        mark("l2-out-a", &log_out),
    )
    .unwrap();
    // a → b: in by ra, out by rb: neither hook.
    let (i0, o0) = (log_in.lock().unwrap().len(), log_out.lock().unwrap().len());
    assert!(udp(&mut s, a, b, B.parse().unwrap()));
    // b's side may answer ARP for the reply path later, but nothing of a → b's
    // datagram arrives on rb or leaves by ra unless b speaks: count b → a only.
    let (i1, o1) = (log_in.lock().unwrap().len(), log_out.lock().unwrap().len());
    assert!(udp(&mut s, b, a, A.parse().unwrap()));
    let (i2, o2) = (log_in.lock().unwrap().len(), log_out.lock().unwrap().len());
    assert!(i2 > i1, "b's datagram arrives on rb");
    assert!(o2 > o1, "and leaves by ra");
    assert!(
        i1 - i0 <= 1 && o1 - o0 <= 1,
        "a → b met them at most for ARP"
    );
}

#[test]
fn an_interfaces_hooks_run_in_their_order_around_the_global_ones() {
    let (mut s, a, r, b, ra, _) = lab(1);
    let log = Arc::new(Mutex::new(Vec::new()));
    let host = s.host(r);
    host.add_if_hook(ra, PfilPoint::Inet, Dir::In, 10, mark("late", &log))
        .unwrap();
    host.add_pfil_hook(PfilPoint::Inet, Dir::In, mark("global", &log));
    host.add_if_hook(ra, PfilPoint::Inet, Dir::In, -10, mark("early", &log))
        .unwrap();
    assert!(udp(&mut s, a, b, B.parse().unwrap()));
    let got = log.lock().unwrap().clone();
    assert_eq!(&got[..3], ["early", "global", "late"], "{got:?}");
}

#[test]
fn ipfw_turned_off_on_one_interface_lets_its_packets_by_and_back_on_stops_them() {
    let (mut s, a, r, b, ra, rb) = lab(1);
    let fw = Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
    fw.load("add 100 deny udp from any to any in\nadd 65000 allow ip from any to any\n")
        .unwrap();
    fw.attach(s.host(r));
    assert!(!udp(&mut s, a, b, B.parse().unwrap()), "denied coming in");
    let h = s.host(r);
    assert!(h
        .set_if_hook(ra, PfilPoint::Inet, Dir::In, "ipfw", false)
        .unwrap());
    assert!(!h
        .set_if_hook(ra, PfilPoint::Inet, Dir::In, "nat", false)
        .unwrap());
    assert!(h.if_hooks(ra).iter().all(|(arc, _)| *arc != "inet-in"));
    assert!(h.if_hooks(rb).iter().any(|(arc, _)| *arc == "inet-in"));
    assert!(udp(&mut s, a, b, B.parse().unwrap()), "off on a's side");
    assert!(!udp(&mut s, b, a, A.parse().unwrap()), "still on b's side");
    assert!(s
        .host(r)
        .set_if_hook(ra, PfilPoint::Inet, Dir::In, "ipfw", true)
        .unwrap());
    assert!(!udp(&mut s, a, b, B.parse().unwrap()), "back on");
}

#[test]
fn an_out_arc_of_one_interface_meets_only_packets_leaving_by_it() {
    for workers in [1, 2] {
        let (mut s, a, r, b, _ra, rb) = lab(workers);
        let log = Arc::new(Mutex::new(Vec::new()));
        let dropper = Arc::new(Mark {
            name: "out-b",
            log: log.clone(),
            drop: true,
        });
        s.host(r)
            .add_if_hook(rb, PfilPoint::Inet, Dir::Out, 0, dropper)
            .unwrap();
        let before = s.host(r).stats().pfil.ip_out_drop;
        assert!(!udp(&mut s, a, b, B.parse().unwrap()), "workers={workers}");
        assert_eq!(s.host(r).stats().pfil.ip_out_drop, before + 1);
        let seen = log.lock().unwrap().len();
        assert!(udp(&mut s, b, a, A.parse().unwrap()), "workers={workers}");
        assert_eq!(log.lock().unwrap().len(), seen, "workers={workers}");
        // Taken off: passes.
        assert!(s
            .host(r)
            .set_if_hook(rb, PfilPoint::Inet, Dir::Out, "out-b", false)
            .unwrap());
        assert!(udp(&mut s, a, b, B.parse().unwrap()), "workers={workers}");
    }
}
