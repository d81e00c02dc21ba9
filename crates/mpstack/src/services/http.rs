//! A small HTTP/1.1 server for static files: GET and HEAD, persistent connections,
//! `Content-Length` on every response. Requests are bounded (headers up to 16 KiB);
//! paths are confined to the served directory.

use super::{write_all, Counters};
use mpstack::http_request::{parse, resolve};
use net::TcpStream;
use std::io::{ErrorKind, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Largest request head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// Idle time allowed on a persistent connection, in 100 ms read slices.
const IDLE_SLICES: u32 = 50;

fn content_type(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" => "text/plain; charset=utf-8",
        "css" => "text/css",
        "js" => "text/javascript",
        "json" => "application/json",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        _ => "application/octet-stream",
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

fn error(c: &mut TcpStream, code: u16, stop: &AtomicBool, counters: &Counters) -> bool {
    let body = format!("{code} {}\n", reason(code));
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
        reason(code),
        body.len(),
        if code == 405 { "Allow: GET, HEAD\r\n" } else { "" }
    );
    write_all(c, head.as_bytes(), stop, counters) && write_all(c, body.as_bytes(), stop, counters)
}

/// Serves requests on one connection until it closes, errs or idles out.
pub(crate) fn serve(root: &Path, c: &mut TcpStream, stop: &AtomicBool, counters: &Counters) {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut idle = 0;
    loop {
        // Read one request head.
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            if buf.len() > MAX_HEAD {
                error(c, 431, stop, counters);
                return;
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match c.read(&mut chunk[..4096]) {
                Ok(0) => return,
                Ok(n) => {
                    idle = 0;
                    counters.bytes_in.fetch_add(n as u64, Ordering::Relaxed);
                    buf.extend_from_slice(&chunk[..n]);
                }
                Err(e) if matches!(e.kind(), ErrorKind::TimedOut | ErrorKind::WouldBlock) => {
                    idle += 1;
                    if idle > IDLE_SLICES {
                        return;
                    }
                }
                Err(_) => return,
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        let req = match parse(&head) {
            Ok(r) => r,
            Err(code) => {
                error(c, code, stop, counters);
                return;
            }
        };
        if req.method != "GET" && req.method != "HEAD" {
            error(c, 405, stop, counters);
            return;
        }
        let file =
            resolve(root, &req.path).and_then(|p| std::fs::File::open(&p).ok().map(|f| (p, f)));
        let Some((path, mut f)) = file.filter(|(_, f)| f.metadata().is_ok_and(|m| m.is_file()))
        else {
            if !error(c, 404, stop, counters) {
                return;
            }
            return;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: {}\r\nContent-Length: {len}\r\nConnection: {}\r\n\r\n",
            content_type(&path),
            if req.keep_alive { "keep-alive" } else { "close" }
        );
        if !write_all(c, head.as_bytes(), stop, counters) {
            return;
        }
        if req.method == "GET" {
            let mut left = len;
            while left > 0 {
                let want = chunk.len().min(left as usize);
                match f.read(&mut chunk[..want]) {
                    Ok(0) | Err(_) => return, // the file shrank: the length is now wrong, close
                    Ok(n) => {
                        if !write_all(c, &chunk[..n], stop, counters) {
                            return;
                        }
                        left -= n as u64;
                    }
                }
            }
        }
        if !req.keep_alive {
            let _ = c.shutdown(std::net::Shutdown::Write);
            return;
        }
    }
}
