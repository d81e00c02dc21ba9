//! `mpstack run`'s own sockets: the control socket (`mpstack route|ifconfig|...
//! -j NAME`), the metrics listener (`--metrics`) and the routing daemon's feed
//! (`--fpm`); and SIGHUP's reload of the config file.

use crate::RunArgs;
use std::net::Ipv4Addr;

/// The FPM listener, its counters and whom it takes routes from.
pub(super) type Fpm = (
    std::net::TcpListener,
    std::sync::Mutex<net::fpm::FpmStats>,
    net::fpm::FpmPolicy,
);

/// What the node listens on besides its stack.
pub(super) struct Endpoints {
    /// The node's name, whose control socket it is.
    pub name: String,
    /// The socket is removed however `run` returns (its drop), if it is still the one
    /// this node made.
    pub control: Option<crate::control::Socket>,
    pub control_stats: crate::control::ControlStats,
    pub metrics: Option<std::net::TcpListener>,
    pub fpm: Option<Fpm>,
}

/// The control socket, metrics and FPM listeners opened.
///
/// The control socket first: a second node of the same name stops here, before it
/// takes any interface. Without --name, a second node takes the default name with
/// its process id, and a node that cannot make its socket (no /run/mpstack) runs
/// without one.
pub(super) fn open(a: &RunArgs) -> Result<Endpoints, String> {
    let given = a.name.is_some();
    let mut name = a
        .name
        .clone()
        .unwrap_or_else(|| crate::control::DEFAULT_NAME.to_string());
    let control = if name == "none" {
        None
    } else {
        match crate::control::listen(&name) {
            Ok(c) => Some(c),
            Err(e) if given => return Err(format!("--name: {e}")),
            Err(_) => {
                name = format!("{}-{}", crate::control::DEFAULT_NAME, std::process::id());
                match crate::control::listen(&name) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        println!("mpstack: no control socket: {e}");
                        None
                    }
                }
            }
        }
    };
    let control_stats = crate::control::ControlStats::default();
    let metrics = match &a.metrics {
        Some(m) => Some(crate::control::metrics::listen(m)?),
        None => None,
    };
    let fpm = match &a.fpm {
        Some(f) => {
            let (at, policy) = fpm_policy(a, f)?;
            let l = std::net::TcpListener::bind(at).map_err(|e| format!("--fpm {at}: {e}"))?;
            Some((
                l,
                std::sync::Mutex::new(net::fpm::FpmStats::default()),
                policy,
            ))
        }
        None => None,
    };
    Ok(Endpoints {
        name,
        control,
        control_stats,
        metrics,
        fpm,
    })
}

/// Where `--fpm` listens and whom it takes routes from: `--fpm` alone or `--fpm
/// PORT` on 127.0.0.1, `--fpm ADDR:PORT` elsewhere (a peer then needs
/// `--fpm-allow` unless it is on loopback); sockets on this host only of root and
/// the `--fpm-user`s.
fn fpm_policy(a: &RunArgs, f: &str) -> Result<(std::net::SocketAddr, net::fpm::FpmPolicy), String> {
    let at: std::net::SocketAddr = match f.parse::<u16>() {
        Ok(port) => (Ipv4Addr::LOCALHOST, port).into(),
        Err(_) => f.parse().map_err(|_| {
            format!("--fpm '{f}': expected PORT or ADDRESS:PORT, e.g. 2620 or 127.0.0.1:2620")
        })?,
    };
    let allow = a
        .fpm_allow
        .iter()
        .map(|p| {
            p.parse::<route::IpPrefix>()
                .map_err(|e| format!("--fpm-allow '{p}': {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if !at.ip().is_loopback() && allow.is_empty() {
        return Err(format!(
            "--fpm {at}: not a loopback address: say which peers may feed the FIB with --fpm-allow PREFIX"
        ));
    }
    let mut uids = vec![0];
    for u in &a.fpm_user {
        match user_id(u) {
            Some(id) => uids.push(id),
            None if u == "frr" && a.fpm_user.len() == 1 => {
                println!("mpstack: --fpm: no user 'frr' on this host; only root's sockets may feed the FIB");
            }
            None => return Err(format!("--fpm-user '{u}': no such user")),
        }
    }
    Ok((
        at,
        net::fpm::FpmPolicy {
            allow,
            local_uids: Some(uids),
            max_routes: a.fpm_max_routes,
            ..net::fpm::FpmPolicy::default()
        },
    ))
}

/// A user's id, by name (from /etc/passwd) or given as a number.
fn user_id(u: &str) -> Option<u32> {
    if let Ok(n) = u.parse() {
        return Some(n);
    }
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let mut f = l.split(':');
        (f.next()? == u).then_some(())?;
        f.nth(1)?.parse().ok()
    })
}

/// SIGHUP: the config file read again and the difference applied (or nothing, if
/// any of it fails); what happened is printed.
pub(super) fn reload_config(
    a: &RunArgs,
    node: &crate::control::cmds::Node<'_>,
    config: &mut crate::control::config::Config,
) {
    let Some(p) = &a.config else {
        println!("mpstack: SIGHUP: no --config to reload");
        return;
    };
    let file = p.display().to_string();
    let r = super::parse::read_config(p).and_then(|new| {
        crate::control::config::reload(node, config, &new, &file).map(|r| (new, r))
    });
    match r {
        Ok((new, r)) => {
            *config = new;
            println!(
                "mpstack: --config {file}: reloaded: {} line(s) undone, {} taken out with no inverse (their settings stay), {} applied",
                r.undone, r.kept, r.applied
            );
        }
        Err(e) => println!("mpstack: --config: reload refused, the node is as it was: {e}"),
    }
}
