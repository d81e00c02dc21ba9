//! TCP Fast Open's cookies, stack-wide (RFC 7413 §4.1; FreeBSD's `tcp_fastopen.c`,
//! the parts that are not a connection's): the server's cookie, a MAC of the
//! client's address ([`TfoState::server_cookie`], SipHash-2-4 under a key derived
//! from the stack's secret, as FreeBSD keys SipHash), and the client's cache of
//! servers' cookies ([`TfoState::client_lookup`], [`TfoState::client_update`]):
//! bounded, and remembering for a while the servers that do not do Fast Open.
//! Plain data behind one lock; the connection's side is `tcb::fastopen`.

use crate::tcp::tcb::{FoCookie, TfoNews};
use dev::{Duration, Instant};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Servers the client cache remembers (FreeBSD: 2,048 buckets of at most 16).
pub const CLIENT_CACHE_MAX: usize = 1024;

/// How long Fast Open stays off towards a server that did not answer it
/// (FreeBSD's `net.inet.tcp.fastopen.path_disable_time`, 900 s).
pub const PATH_DISABLE: Duration = Duration::from_secs(900);

/// Length of the cookies a server gives (FreeBSD's `TCP_FASTOPEN_COOKIE_LEN`).
pub const COOKIE_LEN: usize = 8;

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The server's cookie, or `None` while Fast Open is off towards it.
    cookie: Option<FoCookie>,
    mss: u16,
    /// Fast Open is off towards the server until then.
    off_until: Option<Instant>,
    /// Last looked up or updated: the least recent goes when the cache is full.
    used: Instant,
}

/// What a client connection to a server starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TfoClient {
    /// Send this cookie and data in the SYN; the server's MSS, if known.
    Cookie(FoCookie, u16),
    /// Ask for a cookie.
    Request,
    /// Fast Open is off towards this server for now: a plain SYN.
    Off,
}

/// The stack's Fast Open state.
#[derive(Debug)]
pub struct TfoState {
    key: (u64, u64),
    cache: Mutex<HashMap<IpAddr, Entry>>,
}

impl TfoState {
    /// The cookie key derives from the stack's secret (random, or seeded for a
    /// deterministic simulation).
    pub fn new(secret: u64) -> TfoState {
        TfoState {
            key: (
                splitmix64(secret ^ 0x7f0_c00c_1e00_0001),
                splitmix64(secret ^ 0x7f0_c00c_1e00_0002),
            ),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The cookie this server gives `client` (RFC 7413 §4.1.2: "a MAC tag of the
    /// client's IP address").
    pub fn server_cookie(&self, client: IpAddr) -> FoCookie {
        let bytes = match client {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        let mac = siphash24(self.key, &bytes).to_be_bytes();
        FoCookie::new(&mac[..COOKIE_LEN]).unwrap_or_default()
    }

    /// Whether `cookie` is the one [`TfoState::server_cookie`] gives `client`.
    pub fn server_check(&self, client: IpAddr, cookie: &FoCookie) -> bool {
        !cookie.is_empty() && *cookie == self.server_cookie(client)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Entry>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What a client connection to `server` starts with.
    pub fn client_lookup(&self, server: IpAddr, now: Instant) -> TfoClient {
        let mut c = self.lock();
        let Some(e) = c.get_mut(&server) else {
            return TfoClient::Request;
        };
        e.used = now;
        if let Some(t) = e.off_until {
            if now < t {
                return TfoClient::Off;
            }
            // Time to try again: ask for a cookie afresh.
            e.off_until = None;
            e.cookie = None;
        }
        match e.cookie {
            Some(k) => TfoClient::Cookie(k, e.mss),
            None => TfoClient::Request,
        }
    }

    /// What a handshake with `server` taught.
    pub fn client_update(&self, server: IpAddr, news: TfoNews, now: Instant) {
        let mut c = self.lock();
        if !c.contains_key(&server) && c.len() >= CLIENT_CACHE_MAX {
            // Full: the least recently used server goes.
            if let Some(old) = c.iter().min_by_key(|(_, e)| e.used).map(|(a, _)| *a) {
                c.remove(&old);
            }
        }
        let e = match news {
            TfoNews::Cookie { cookie, mss } => Entry {
                cookie: Some(cookie),
                mss,
                off_until: None,
                used: now,
            },
            TfoNews::NoFastOpen => {
                // An earlier disabling keeps its time (as FreeBSD's).
                let until = c
                    .get(&server)
                    .and_then(|e| e.off_until)
                    .unwrap_or(now + PATH_DISABLE);
                Entry {
                    cookie: None,
                    mss: 0,
                    off_until: Some(until),
                    used: now,
                }
            }
        };
        c.insert(server, e);
    }

    /// Forgets every server (`net.inet.tcp.fastopen.client_enable` turned off,
    /// as FreeBSD destroys its cache then).
    pub fn client_flush(&self) {
        self.lock().clear();
    }

    /// Servers in the cache.
    pub fn client_len(&self) -> usize {
        self.lock().len()
    }
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// SipHash-2-4 (Aumasson and Bernstein) of `m` under `key`.
fn siphash24(key: (u64, u64), m: &[u8]) -> u64 {
    let mut v = [
        key.0 ^ 0x736f_6d65_7073_6575,
        key.1 ^ 0x646f_7261_6e64_6f6d,
        key.0 ^ 0x6c79_6765_6e65_7261,
        key.1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let compress = |v: &mut [u64; 4], w: u64| {
        v[3] ^= w;
        round(v);
        round(v);
        v[0] ^= w;
    };
    let mut chunks = m.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        compress(&mut v, u64::from_le_bytes(w));
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = m.len() as u8;
    compress(&mut v, u64::from_le_bytes(last));
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference vector of the SipHash paper (appendix A): key 00..0f,
    /// message 00..0e.
    #[test]
    fn siphash_matches_the_paper() {
        let key = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        let m: Vec<u8> = (0u8..15).collect();
        assert_eq!(siphash24(key, &m), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn cookies_are_per_client_and_per_key() {
        let s = TfoState::new(1);
        let a: IpAddr = "198.18.0.2".parse().unwrap();
        let b: IpAddr = "198.18.0.3".parse().unwrap();
        let c = s.server_cookie(a);
        assert_eq!(c.len(), COOKIE_LEN);
        assert!(s.server_check(a, &c));
        assert!(!s.server_check(b, &c));
        assert!(!s.server_check(a, &FoCookie::REQUEST));
        assert!(!TfoState::new(2).server_check(a, &c));
    }

    #[test]
    fn the_client_cache_is_bounded_and_forgets_disabled_paths_in_time() {
        let s = TfoState::new(1);
        let t0 = Instant::ZERO;
        let k = FoCookie::new(&[1, 2, 3, 4]).unwrap();
        for i in 0..CLIENT_CACHE_MAX as u32 + 10 {
            let ip = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            let news = TfoNews::Cookie {
                cookie: k,
                mss: 1460,
            };
            s.client_update(ip, news, t0 + Duration::from_millis(u64::from(i)));
        }
        assert_eq!(s.client_len(), CLIENT_CACHE_MAX);
        let srv: IpAddr = "10.9.9.9".parse().unwrap();
        assert_eq!(s.client_lookup(srv, t0), TfoClient::Request);
        s.client_update(srv, TfoNews::NoFastOpen, t0);
        assert_eq!(
            s.client_lookup(srv, t0 + Duration::from_secs(1)),
            TfoClient::Off
        );
        assert_eq!(s.client_lookup(srv, t0 + PATH_DISABLE), TfoClient::Request);
        s.client_flush();
        assert_eq!(s.client_len(), 0);
    }
}
