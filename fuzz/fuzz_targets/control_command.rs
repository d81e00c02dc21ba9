//! Arbitrary requests to a node's control socket: the bytes as a request frame
//! (`control::read_request`), and as the words of a command run against a node
//! with two links, a bridge, a spare link and a firewall (`cmds::execute`), and as
//! a config file (`config::parse`). No panic, no hang (streaming commands see
//! `stop` set and return), every failure an error with a status. The node is
//! built once and rebuilt every 2,000 inputs, so changes carry over between them
//! but the tables the fuzzer fills stay small.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mpstack::control::{self, cmds, config};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

struct Rig {
    sim: sim::Sim,
    host: sim::HostId,
    fw: cmds::Firewall,
    packet: cmds::PacketLinks,
    runs: u32,
}

static RIG: Mutex<Option<Rig>> = Mutex::new(None);

const COMMANDS: &[&str] = &[
    "ifconfig", "route", "netstat", "arp", "ndp", "ipfw", "sysctl",
];

fn rig() -> Rig {
    use dev::mem::WireConfig;
    let mut sim = sim::Sim::new(7);
    let r = sim.add_host("r", 1);
    let a = sim.add_host("a", 1);
    let b = sim.add_host("b", 1);
    sim.link(r, "198.18.1.1/24", a, "198.18.1.2/24", WireConfig::default());
    sim.link(r, "198.18.2.1/24", b, "198.18.2.2/24", WireConfig::default());
    let hub = sim.add_hub(WireConfig::default());
    let m0 = sim.connect_named(r, hub, "", "em0");
    sim.connect_named(r, hub, "", "em1");
    let st = sim.host(r);
    let br = st
        .add_bridge("bridge0", net::link::bridge::BridgeParams::default())
        .unwrap();
    st.bridge_add_member(br, m0, net::link::bridge::MemberFlags::default())
        .unwrap();
    let ipfw = net::ipfw::Ipfw::new(fw::RulesetConfig::default(), 1).unwrap();
    ipfw.load("add 100 allow ip from any to any\n").unwrap();
    ipfw.attach(st);
    Rig {
        sim,
        host: r,
        fw: cmds::Firewall::running(ipfw, true, false),
        packet: cmds::PacketLinks::new(),
        runs: 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = control::read_request(&mut &data[..]);
    let text = String::from_utf8_lossy(data);
    let _ = config::parse(&text);

    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mut args = vec![COMMANDS[usize::from(pick) % COMMANDS.len()].to_string()];
    args.extend(
        String::from_utf8_lossy(rest)
            .split(|c: char| c.is_whitespace() || c == '\0')
            .filter(|w| !w.is_empty())
            .take(64)
            .map(str::to_string),
    );
    let mut g = RIG.lock().unwrap_or_else(|e| e.into_inner());
    if g.as_ref().is_none_or(|r| r.runs >= 2000) {
        *g = Some(rig());
    }
    let rig = g.as_mut().unwrap();
    rig.runs += 1;
    let node = cmds::Node {
        stack: rig.sim.host(rig.host),
        fw: &rig.fw,
        sysctl: Mutex::new(()),
        fpm: None,
        packet: Some(&rig.packet),
        clock: None,
    };
    let stop = AtomicBool::new(true);
    let mut conn = control::Conn::buffer();
    if let Err(f) = cmds::execute(&node, &args, &mut conn, &stop) {
        assert!(f.code != 0, "a failure with status 0: {}", f.msg);
        assert!(!f.msg.is_empty(), "a failure without a message");
    }
});
