//! The small TCP services of `mpstack run --serve` (inetd's internal services):
//! echo (RFC 862, port 7), discard (RFC 863, port 9) and chargen (RFC 864, port 19);
//! and a small HTTP/1.1 server for the static files of a directory (port 80: GET and
//! HEAD, keep-alive, `Content-Length`; no ranges).
//! One thread per connection, at most [`MAX_CONNS`] at once; every thread watches the
//! stop flag so SIGINT/SIGTERM ends them within a read timeout.

use net::{Stack, TcpListener, TcpStream};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Connections served at once, over all services.
pub const MAX_CONNS: usize = 256;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Service {
    Echo,
    Discard,
    Chargen,
    /// Static files from this directory.
    Http(std::path::PathBuf),
}

impl Service {
    pub fn port(&self) -> u16 {
        match self {
            Service::Echo => 7,
            Service::Discard => 9,
            Service::Chargen => 19,
            Service::Http(_) => 80,
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            Service::Echo => "echo",
            Service::Discard => "discard",
            Service::Chargen => "chargen",
            Service::Http(_) => "http",
        }
    }
}

/// Parses `echo,discard,chargen` (or `none`).
pub fn parse_list(s: &str) -> Result<Vec<Service>, String> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let svc = match part {
            "echo" => Service::Echo,
            "discard" => Service::Discard,
            "chargen" => Service::Chargen,
            "none" => continue,
            http if http.starts_with("http=") => {
                let dir = std::path::PathBuf::from(&http[5..]);
                if !dir.is_dir() {
                    return Err(format!("--serve: http={}: not a directory", dir.display()));
                }
                Service::Http(dir)
            }
            other => {
                return Err(format!(
                    "--serve: unknown service '{other}' (known: echo, discard, chargen, http=DIR, none)"
                ))
            }
        };
        if !v.contains(&svc) {
            v.push(svc);
        }
    }
    Ok(v)
}

/// Bytes moved by the services, for the exit report.
#[derive(Debug, Default)]
pub struct Counters {
    pub connections: AtomicU64,
    pub refused: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

/// Starts a listener thread per service and family: IPv4 always, IPv6 (on `[::]`)
/// with `inet6`.
pub fn start(
    stack: &Stack,
    services: &[Service],
    inet6: bool,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
) -> Result<Vec<JoinHandle<()>>, String> {
    let active = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    let mut listens: Vec<(Service, std::net::SocketAddr)> = Vec::new();
    for svc in services {
        listens.push((
            svc.clone(),
            SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, svc.port()).into(),
        ));
        if inet6 {
            listens.push((
                svc.clone(),
                std::net::SocketAddr::new(std::net::Ipv6Addr::UNSPECIFIED.into(), svc.port()),
            ));
        }
    }
    for (svc, at) in listens {
        let l = stack
            .tcp_listen(at, 128)
            .map_err(|e| format!("{} service (TCP {at}): {e}", svc.name()))?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        let (stop, counters, active) = (stop.clone(), counters.clone(), active.clone());
        let name = svc.name();
        let t = std::thread::Builder::new()
            .name(format!("tcp-{name}"))
            .spawn(move || listen_loop(svc, l, stop, counters, active))
            .map_err(|e| e.to_string())?;
        threads.push(t);
    }
    Ok(threads)
}

fn listen_loop(
    svc: Service,
    l: TcpListener,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    active: Arc<AtomicUsize>,
) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match l.accept() {
            Ok((c, _)) => {
                if active.fetch_add(1, Ordering::AcqRel) >= MAX_CONNS {
                    active.fetch_sub(1, Ordering::AcqRel);
                    counters.refused.fetch_add(1, Ordering::Relaxed);
                    drop(c);
                    continue;
                }
                counters.connections.fetch_add(1, Ordering::Relaxed);
                let (stop2, counters2, active2) = (stop.clone(), counters.clone(), active.clone());
                let svc2 = svc.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("{}-conn", svc.name()))
                    .spawn(move || {
                        serve(svc2, c, &stop2, &counters2);
                        active2.fetch_sub(1, Ordering::AcqRel);
                    });
                match spawned {
                    Ok(h) => conns.push(h),
                    Err(_) => {
                        active.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                conns.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    for h in conns {
        let _ = h.join();
    }
}

fn serve(svc: Service, mut c: TcpStream, stop: &AtomicBool, counters: &Counters) {
    let _ = c.set_read_timeout(Some(Duration::from_millis(100)));
    let _ = c.set_write_timeout(Some(Duration::from_millis(100)));
    let mut buf = vec![0u8; 64 * 1024];
    match svc {
        Service::Echo | Service::Discard => loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    counters.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                    if svc == Service::Echo && !write_all(&mut c, &buf[..n], stop, counters) {
                        return;
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {}
                Err(_) => return,
            }
        },
        Service::Http(dir) => http::serve(&dir, &mut c, stop, counters),
        Service::Chargen => {
            let mut line = 0usize;
            loop {
                let mut n = 0;
                while n + 74 <= buf.len() {
                    for k in 0..72 {
                        buf[n + k] = b' ' + ((line + k) % 95) as u8;
                    }
                    buf[n + 72] = b'\r';
                    buf[n + 73] = b'\n';
                    n += 74;
                    line += 1;
                }
                if !write_all(&mut c, &buf[..n], stop, counters) {
                    return;
                }
            }
        }
    }
    let _ = c.shutdown(std::net::Shutdown::Write);
}

pub(crate) fn write_all(
    c: &mut TcpStream,
    mut data: &[u8],
    stop: &AtomicBool,
    counters: &Counters,
) -> bool {
    while !data.is_empty() {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        match c.write(data) {
            Ok(n) => {
                counters.bytes_out.fetch_add(n as u64, Ordering::Relaxed);
                data = &data[n..];
            }
            Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {}
            Err(_) => return false,
        }
    }
    true
}

mod http;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_lists_parse() {
        assert_eq!(parse_list("echo").unwrap(), vec![Service::Echo]);
        assert_eq!(
            parse_list("echo, discard,chargen,echo").unwrap(),
            vec![Service::Echo, Service::Discard, Service::Chargen]
        );
        assert!(parse_list("none").unwrap().is_empty());
        assert!(parse_list("http")
            .unwrap_err()
            .contains("unknown service 'http'"));
    }
}
