//! `bench router`'s stack under test: a router [`Stack`] on the generator and the
//! four sinks, its routes, its neighbours and its firewall; and one row measured on
//! it — built, warmed up, checked against the oracle, timed.

use super::connected::connect;
use super::frames::{gw_addr4, gw_addr6, gw_ifindex, gw_mac, if_mac, Table4, Table6};
use super::oracle::check;
use super::timing::{row_of, time_stack};
use super::{what, Case, Fw, Routes, Row, CHECKED, GATEWAYS, OUT_IFACES, STACK_NAME, STATE_FLOWS};
use crate::bench::progress;
use crate::BenchArgs;
use dev::gen::PktGen;
use net::iface::{IfConfig, Inet6Addr, InetAddr};
use net::{Stack, StackConfig};
use route::{IpPrefix, Prefix4, Prefix6, RouteSpec};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Frames in a row's set from which on the warm-up sends each of them once before
/// the check and the timing (every destination seen, every state made).
const WHOLE_PASS: usize = 100_000;

/// A router stack of `workers` workers on a generator (in0) and four sinks, with
/// `routes`' gateways resolved statically.
pub(super) fn router(
    gen: &PktGen,
    frames: &[Vec<u8>],
    workers: usize,
    routes4: &[(Prefix4, u32)],
    routes6: &[(Prefix6, u32)],
) -> Result<Stack, String> {
    let mut stack = Stack::new(StackConfig {
        name: STACK_NAME.into(),
        workers,
        isn_secret: Some(0x726f_7574),
        dad_transmits: 0,
        send_redirects: false,
        ..StackConfig::default()
    });
    let err = |e: net::StackError| format!("bench router: {e}");
    let mut ifs = Vec::new();
    for i in 0..=OUT_IFACES {
        let ic = IfConfig {
            name: Some(if i == 0 {
                "in0".into()
            } else {
                format!("out{i}")
            }),
            mac: Some(if_mac(i)),
            addrs: vec![InetAddr::new(Ipv4Addr::new(198, 18, i as u8, 1), 24)],
            mtu: None,
        };
        let dev: Box<dyn dev::Device> = if i == 0 {
            Box::new(gen.generator("gen", frames))
        } else {
            Box::new(gen.sink(&format!("sink{i}")))
        };
        let idx = stack.add_interface(dev, ic).map_err(err)?;
        if !routes6.is_empty() {
            let a = Ipv6Addr::new(0x2001, 2, i as u16, 0, 0, 0, 0, 1);
            stack
                .add_address6(idx, Inet6Addr::new(a, 64))
                .map_err(err)?;
        }
        stack.set_forwarding(idx, true, true).map_err(err)?;
        ifs.push(idx);
    }
    let cfg = stack.config();
    for g in 0..GATEWAYS {
        let ifp = &cfg.ifaces[gw_ifindex(g) as usize];
        ifp.arp.insert_static(gw_addr4(g), gw_mac(g));
        if !routes6.is_empty() {
            ifp.nd6.insert_static(gw_addr6(g), gw_mac(g));
        }
    }
    let r = stack.route_batch(|rib| -> Result<(), route::RtError> {
        for &(p, g) in routes4 {
            let dst = IpPrefix::new(Ipv4Addr::from(p.addr).into(), p.len);
            rib.add(RouteSpec::via(dst, gw_addr4(g).into(), gw_ifindex(g)))?;
        }
        for &(p, g) in routes6 {
            let dst = IpPrefix::new(Ipv6Addr::from(p.addr).into(), p.len);
            rib.add(RouteSpec::via(dst, gw_addr6(g).into(), gw_ifindex(g)))?;
        }
        Ok(())
    });
    r.map_err(|e| format!("bench router: adding routes: {e}"))?;
    Ok(stack)
}

/// A hook that passes every packet (`arc-other`: it sits where no packet goes).
#[derive(Debug)]
struct PassHook;

impl net::PfilHook for PassHook {
    fn name(&self) -> &str {
        "pass"
    }
    fn filter(&self, m: mbuf::Mbuf, _cx: &net::PfilCtx<'_>) -> net::Verdict {
        net::Verdict::Pass(m)
    }
}

/// The firewall of a row, attached to `stack`.
pub(super) fn firewall(stack: &Stack, fw: Fw, workers: usize) -> Result<(), String> {
    let rules = match fw {
        Fw::None => return Ok(()),
        Fw::OtherIf => {
            for (point, dir) in [
                (net::PfilPoint::Inet, net::Dir::Out),
                (net::PfilPoint::Ether, net::Dir::Out),
            ] {
                stack
                    .add_if_hook(net::IfIndex(0), point, dir, 0, Arc::new(PassHook))
                    .map_err(|e| format!("bench router: arc-other: {e}"))?;
            }
            return Ok(());
        }
        Fw::Rules(n) => {
            let mut s = String::new();
            for i in 0..n {
                s.push_str(&format!(
                    "add {} deny ip from 192.0.2.{} to any\n",
                    100 + i,
                    i % 250 + 1
                ));
            }
            s.push_str("add 60000 allow ip from any to any\n");
            s
        }
        Fw::KeepState => {
            "add 100 check-state\nadd 200 allow ip from any to any keep-state\n".into()
        }
    };
    let mut cfg = fw::RulesetConfig::default();
    cfg.states.max_states = STATE_FLOWS + STATE_FLOWS / 4;
    let f = net::ipfw::Ipfw::new(cfg, workers).map_err(|e| format!("bench router: ipfw: {e}"))?;
    f.load(&rules)
        .map_err(|e| format!("bench router: ipfw rules: {e}"))?;
    f.attach(stack);
    Ok(())
}

/// Measures row `c` sending `frames`: its stack built (the routes of `t4` and `t6`,
/// its firewall) and started, warmed up, [`CHECKED`] of the frames it forwards
/// checked against the oracles, then timed for `--rounds` windows of `--seconds`.
pub(super) fn measure(
    a: &BenchArgs,
    c: &Case,
    frames: &[Vec<u8>],
    (t4, t6): (&Table4, &Table6),
    hz: Option<f64>,
) -> Result<Row, String> {
    let nroutes = t4.routes.len() + t6.routes.len();
    let (w, name) = (c.workers, c.name);
    progress(
        a,
        &format!("router: {name}, {w} worker(s): building the stack ({nroutes} routes)"),
    );
    let gen = PktGen::with_buffers(w, 1500, c.buffers);
    let mut stack = router(&gen, frames, w, &t4.routes, &t6.routes)?;
    if c.routes == Routes::Connected {
        connect(&stack)?;
    }
    firewall(&stack, c.fw, w)?;
    stack
        .start()
        .map_err(|e| format!("bench router: starting the workers: {e}"))?;
    // Warm up: neighbours and caches warm, with a large set every destination seen
    // and every state made; then check a sample.
    let warm = if frames.len() >= WHOLE_PASS {
        progress(
            a,
            &format!(
                "router: {name}, {w} worker(s): a pass over the {} frames",
                frames.len()
            ),
        );
        let target = gen.counts().generated + frames.len() as u64 + 1;
        let t0 = Instant::now();
        while gen.counts().generated < target && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        0.05
    } else {
        0.2
    };
    std::thread::sleep(Duration::from_secs_f64(warm));
    gen.capture(CHECKED);
    let t0 = Instant::now();
    while gen.captured().len() < CHECKED && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let checked = match check(&gen.captured(), &t4.oracle, &t6.oracle) {
        Ok(n) if n > 0 => n,
        Ok(_) => {
            stack.stop();
            let mut counters = String::new();
            let _ = stack.stats().write_netstat(&mut counters, false);
            return Err(format!(
                "bench router: {name}: no frame came out of the router; its counters:\n{counters}"
            ));
        }
        Err(e) => {
            stack.stop();
            return Err(format!("bench router: {name}: {e}"));
        }
    };
    let (secs, rounds) = (a.seconds, a.rounds);
    progress(
        a,
        &format!(
            "router: {name}, {w} worker(s): {checked} frames match the oracle; {rounds} x {secs} s"
        ),
    );
    let win = time_stack(&stack, &gen, w, secs, rounds);
    stack.stop();
    Ok(Row {
        flows: frames.len(),
        buffers: Some(c.buffers),
        ..row_of(name, what(c, nroutes), nroutes, &win, hz)
    })
}
