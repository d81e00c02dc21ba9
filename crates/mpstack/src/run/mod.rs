//! `mpstack run`: a host on a TAP device.
//!
//! The node is made in steps, each in a module of its own: the arguments read and
//! checked ([`parse`]), its own sockets opened ([`sockets`]), the stack made with
//! its interfaces, routes and firewall ([`stack`]); then its services started, the
//! main loop run until a signal ([`serve`]), and what it did printed ([`report`]).

mod parse;
mod report;
mod sockets;
mod stack;

use crate::RunArgs;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub fn main(a: RunArgs) -> Result<ExitCode, String> {
    crate::control::log::init(&a.log_level)?;
    let plan = parse::plan(&a)?;
    let mut config = match &a.config {
        Some(p) => parse::read_config(p)?,
        None => Default::default(),
    };
    let ends = sockets::open(&a)?;
    let workers = a.workers as usize;
    let queues = a.queues.map(|q| q as usize).unwrap_or(workers).max(1);
    let stack::Built {
        mut stack,
        tuned,
        dn_limits,
        packet_links,
    } = stack::build(&a, &plan, workers, queues)?;
    let any6 = plan.inet6.iter().any(|v| !v.is_empty());
    let firewall = stack::firewall(&a, &stack, &config, workers, dn_limits)?;
    if let Some(p) = &a.config {
        let node = crate::control::cmds::Node {
            stack: &stack,
            fw: &firewall,
            sysctl: std::sync::Mutex::new(()),
            fpm: None,
            packet: Some(&packet_links),
            clock: None,
        };
        let n = crate::control::config::apply(&node, &config, &p.display().to_string())
            .map_err(|e| format!("--config: {e}"))?;
        println!("mpstack: --config {}: {n} line(s) applied", p.display());
    }
    // The workers' clock, kept to give the dynamic states' lifetimes at exit.
    let clock = Arc::new(dev::time::MonotonicClock::new());
    stack
        .start_with_clock(clock.clone())
        .map_err(|e| format!("starting workers: {e}"))?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| format!("signal handler: {e}"))?;
    }
    let hup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())
        .map_err(|e| format!("signal handler: {e}"))?;
    let tcp_counters = Arc::new(crate::services::Counters::default());
    let limits = crate::services::Limits {
        max_conns: a.serve_max_conns,
        idle_timeout: Duration::from_secs_f64(a.serve_idle_timeout),
        header_timeout: Duration::from_secs_f64(a.serve_header_timeout),
        max_conns_per_source: a.serve_max_conns_per_source,
    };
    let tcp_services = crate::services::start(
        &stack,
        &plan.services,
        any6,
        workers,
        limits,
        stop.clone(),
        tcp_counters.clone(),
    )?;
    let svc_names = crate::services::describe(&plan.services, any6);
    let ifs = report::interfaces(&stack, &plan.names);
    for t in &tuned {
        println!("mpstack: sysctl {t}");
    }
    println!(
        "mpstack: up on {}{}, {} worker(s), {} queue(s); services: {svc_names}; SIGINT or SIGTERM stops",
        ifs.join(" and "),
        if a.forwarding { ", forwarding" } else { "" },
        workers,
        queues,
    );

    let udp_counters = Arc::new(crate::services::UdpCounters::default());
    let udp_limits = crate::services::UdpLimits {
        per_source_rate: a.serve_udp_rate,
        burst: a.serve_udp_rate.saturating_mul(2),
        ..crate::services::UdpLimits::default()
    };
    let udp_services = crate::services::start_udp(
        &stack,
        &plan.services,
        any6,
        udp_limits,
        stop.clone(),
        udp_counters.clone(),
    )?;

    let started = std::time::Instant::now();
    let node = crate::control::cmds::Node {
        stack: &stack,
        fw: &firewall,
        sysctl: std::sync::Mutex::new(()),
        fpm: ends.fpm.as_ref().map(|(_, st, _)| st),
        packet: Some(&packet_links),
        clock: Some(&*clock),
    };
    if let Some(c) = &ends.control {
        println!(
            "mpstack: control socket {} (mpstack route|netstat|ifconfig|arp|ndp|ipfw|sysctl -j {})",
            c.path.display(),
            ends.name
        );
    }
    let code = serve(&a, &node, &ends, &plan, (&stop, &hup), &mut config, started);
    if ends.control.is_some() {
        println!("mpstack: {}", ends.control_stats.summary());
    }
    udp_services.join();
    tcp_services.join();
    stack.stop();
    report::services(
        &a,
        &tcp_counters,
        &limits,
        &udp_counters,
        &udp_limits,
        started,
    );
    report::state(&stack, &plan.names, &*clock, &firewall);
    Ok(code)
}

/// The node's main loop: the control socket, route events, the FPM feed and the
/// metrics served on threads of their own, the client run (`--connect`), SIGHUP's
/// reloads, until SIGINT, SIGTERM or `--duration` raises `stop`.
fn serve(
    a: &RunArgs,
    node: &crate::control::cmds::Node<'_>,
    ends: &sockets::Endpoints,
    plan: &parse::Plan,
    (stop, hup): (&AtomicBool, &AtomicBool),
    config: &mut crate::control::config::Config,
    started: std::time::Instant,
) -> ExitCode {
    let mut code = ExitCode::SUCCESS;
    std::thread::scope(|scope| {
        if let Some(c) = &ends.control {
            let st = &ends.control_stats;
            scope.spawn(move || crate::control::serve(&c.listener, node, stop, st));
        }
        scope.spawn(move || crate::control::log::route_events(node, stop));
        if let Some((l, st, policy)) = &ends.fpm {
            let stack = node.stack;
            scope.spawn(move || net::fpm::serve(stack, l, stop, st, policy));
            if let Ok(at) = l.local_addr() {
                let from = if policy.allow.is_empty() {
                    "loopback".to_string()
                } else {
                    policy
                        .allow
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                println!(
                    "mpstack: routes from FRR (fpm) at {at}, from {from} (users {}), at most {} routes",
                    a.fpm_user.join(" "),
                    policy.max_routes
                );
            }
        }
        if let Some(l) = &ends.metrics {
            let name = &ends.name;
            scope.spawn(move || crate::control::metrics::serve(l, node, name, stop));
            if let Ok(at) = l.local_addr() {
                println!("mpstack: metrics at http://{at}/metrics");
            }
        }
        if let Some(to) = plan.connect {
            match crate::client::run(node.stack, to, plan.send, a.seed, stop) {
            Ok(r) => println!(
                "mpstack: client: sent {} byte(s) sha256 {}, received {} byte(s) sha256 {}, in {:.3}s ({:.3} Gbit/s out)",
                r.sent,
                r.sent_sha256,
                r.received,
                r.received_sha256,
                r.secs,
                r.sent as f64 * 8.0 / r.secs.max(1e-9) / 1e9
            ),
            Err(e) => {
                eprintln!("mpstack: client: {e}");
                code = ExitCode::FAILURE;
            }
        }
            stop.store(true, Ordering::Relaxed);
        }
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
            if hup.swap(false, Ordering::Relaxed) {
                sockets::reload_config(a, node, config);
            }
            if a.duration
                .is_some_and(|d| started.elapsed().as_secs_f64() >= d)
            {
                stop.store(true, Ordering::Relaxed);
            }
        }
    });
    code
}
