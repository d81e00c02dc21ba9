//! The HTTP service: static files from one directory, served by hyper's HTTP/1.1
//! server over the stack's socket. GET and HEAD, persistent connections,
//! `Content-Length` on every response; paths are confined to the served directory,
//! symbolic links included (`http_request::resolve` and `confine`: outside is
//! 404). The file itself is opened without following a link and without blocking
//! (`dev::file::open_regular`): a symbolic link, a FIFO, a device or a directory
//! is 404, found so on the descriptor before any read, so a FIFO put in the
//! directory cannot stall the services' threads. A path with a component that
//! starts with a dot (`.git`, `.htpasswd`) is 404 too, as if it were not there.
//! Errors (404, 405) close the connection, as before hyper; request heads are
//! bounded (16 KiB, exactly: beyond it hyper answers 431 and closes) and must
//! arrive within the header timeout.

use crate::http_request::{confine, resolve};
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderValue, ALLOW, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use std::convert::Infallible;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Largest request head accepted: the request line and header fields with their
/// line ends and the blank line, in bytes. hyper's `max_header_size` holds a head
/// to it exactly (431 beyond); its `max_buf_size`, the read buffer's bound, is set
/// to it too, but alone let a longer head through, read whole into a buffer a
/// previous request had grown.
const MAX_HEAD: usize = 16 * 1024;
/// A file is read and sent in pieces of this size.
const PIECE: usize = 64 * 1024;
/// And of this size while the stack's TCP memory is under pressure
/// (`net.inet.tcp.mem`). hyper holds a piece until the socket takes it, and takes
/// the next while its buffer holds less than `MAX_HEAD`: what the service buffers
/// for a connection whose peer does not read is at most `MAX_HEAD` and a piece,
/// 80 KiB, or 20 KiB under pressure, on top of what the stack's bound counts.
const PIECE_TIGHT: usize = 4 * 1024;

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

/// A response body: a short text, or a file read piece by piece as the connection
/// takes it.
pub(crate) enum FileBody {
    Text(Option<Bytes>),
    /// The file and the bytes still to send (the `Content-Length` given), and the
    /// stack's TCP memory, whose state sizes the pieces.
    File(std::fs::File, u64, Option<Arc<net::tcp::TcpMem>>),
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            FileBody::Text(t) => Poll::Ready(t.take().map(|b| Ok(Frame::data(b)))),
            FileBody::File(_, 0, _) => Poll::Ready(None),
            FileBody::File(f, left, mem) => {
                let piece = match mem {
                    Some(m) if m.state() != net::tcp::MemState::Normal => PIECE_TIGHT,
                    _ => PIECE,
                };
                // A read from the page cache, on the runtime's thread: tokio::fs
                // would hand each piece to another thread and back.
                let mut buf = vec![0u8; piece.min(*left as usize)];
                match f.read(&mut buf) {
                    // The file shrank: the length is now wrong; an error closes.
                    Ok(0) => Poll::Ready(Some(Err(std::io::ErrorKind::UnexpectedEof.into()))),
                    Ok(n) => {
                        buf.truncate(n);
                        *left -= n as u64;
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
                    }
                    Err(e) => Poll::Ready(Some(Err(e))),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, FileBody::Text(None) | FileBody::File(_, 0, _))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            FileBody::Text(t) => SizeHint::with_exact(t.as_ref().map_or(0, |b| b.len() as u64)),
            FileBody::File(_, left, _) => SizeHint::with_exact(*left),
        }
    }
}

fn reason(code: StatusCode) -> &'static str {
    code.canonical_reason().unwrap_or("Error")
}

/// An error response, with the connection closed after it.
fn error(code: StatusCode) -> Response<FileBody> {
    let body = format!("{} {}\n", code.as_u16(), reason(code));
    let mut r = Response::new(FileBody::Text(Some(Bytes::from(body))));
    *r.status_mut() = code;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    h.insert(CONNECTION, HeaderValue::from_static("close"));
    if code == StatusCode::METHOD_NOT_ALLOWED {
        h.insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    r
}

/// The answer to one request.
pub(crate) fn respond(
    root: &Path,
    req: &Request<Incoming>,
    mem: Option<&Arc<net::tcp::TcpMem>>,
) -> Response<FileBody> {
    let mut r = respond_to(root, req.method(), req.uri().path());
    if let FileBody::File(_, _, m) = r.body_mut() {
        *m = mem.cloned();
    }
    r
}

fn respond_to(root: &Path, method: &Method, path: &str) -> Response<FileBody> {
    if method != Method::GET && method != Method::HEAD {
        return error(StatusCode::METHOD_NOT_ALLOWED);
    }
    // Dotfiles are not served (nginx's and Apache's usual `deny` of `/\.`): they
    // are a repository's, an editor's or a password file's, not the site's.
    if path.split('/').any(|c| c.starts_with('.')) {
        return error(StatusCode::NOT_FOUND);
    }
    // The directories on the way may be links, if they lead to somewhere inside
    // the served directory; the file itself may not be one. Outside is 404, not
    // 403: as for a path with `..`, the client learns nothing of what lies beyond.
    let file = resolve(root, path).and_then(|p| {
        confine(root, &p)?;
        let (f, len) = dev::file::open_regular(&p).ok()?;
        Some((p, f, len))
    });
    let Some((path, f, len)) = file else {
        return error(StatusCode::NOT_FOUND);
    };
    let body = if method == Method::HEAD {
        FileBody::Text(None)
    } else {
        FileBody::File(f, len, None)
    };
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type(&path)));
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    r
}

/// Serves requests on one connection until it closes, errs, or sends no request
/// head within `header_timeout` (a hyper error that `is_timeout`).
pub(crate) async fn serve<IO>(
    root: &Path,
    io: IO,
    header_timeout: Duration,
    mem: Option<Arc<net::tcp::TcpMem>>,
) -> Result<(), hyper::Error>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let root: PathBuf = root.to_path_buf();
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let r = respond(&root, &req, mem.as_ref());
        async move { Ok::<_, Infallible>(r) }
    });
    hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_header_size(MAX_HEAD)
        .max_buf_size(MAX_HEAD)
        // Header names as the server before hyper wrote them (`Content-Length`).
        .title_case_headers(true)
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A request for `/` whose head (request line to blank line) is `size` bytes;
    /// the connection kept alive after it, or closed.
    fn head_of(size: usize, keep: bool) -> Vec<u8> {
        let close = if keep { "" } else { "Connection: close\r\n" };
        let mut h = format!("GET / HTTP/1.1\r\nHost: x\r\n{close}X-Pad: ").into_bytes();
        h.resize(size - 4, b'a');
        h.extend_from_slice(b"\r\n\r\n");
        h
    }

    /// What `serve` answers to `req`, written through a pipe that holds `pipe`
    /// bytes (so hyper's reads return at most that much).
    fn answer(root: &Path, req: &[u8], pipe: usize) -> String {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let (client, server) = tokio::io::duplex(pipe);
            let root = root.to_path_buf();
            let served =
                tokio::spawn(
                    async move { serve(&root, server, Duration::from_secs(5), None).await },
                );
            let (mut rd, mut wr) = tokio::io::split(client);
            let mut resp = Vec::new();
            let write = async {
                let _ = wr.write_all(req).await;
            };
            let read = async {
                let _ = rd.read_to_end(&mut resp).await;
            };
            tokio::join!(write, read);
            let _ = served.await;
            String::from_utf8_lossy(&resp).into_owned()
        })
    }

    /// The head is held to [`MAX_HEAD`] exactly. hyper's `max_buf_size` alone
    /// bounds its read buffer, not a head: on a kept-alive connection, with the
    /// buffer grown and reused by the first request, a second head of 20 KB was
    /// taken whole.
    #[test]
    fn request_heads_are_held_to_16_kib_exactly() {
        const TOO_LARGE: &str = "HTTP/1.1 431 Request Header Fields Too Large\r\n";
        let dir = std::env::temp_dir().join(format!("mpstack-http-head-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), "<h1>x</h1>\n").unwrap();
        for (size, served) in [
            (15 * 1024, true),
            (MAX_HEAD, true),
            (MAX_HEAD + 1, false),
            (17 * 1024, false),
            (20_000, false),
        ] {
            for pipe in [1460, 4096, 64 * 1024] {
                let r = answer(&dir, &head_of(size, false), pipe);
                let want = if served {
                    "HTTP/1.1 200 OK\r\n"
                } else {
                    TOO_LARGE
                };
                assert!(r.starts_with(want), "{size} through {pipe}: {r}");
            }
        }
        // A short request kept alive, then a long one.
        for pipe in [1460, 4096, 8191, 64 * 1024] {
            let mut req = head_of(300, true);
            req.extend_from_slice(&head_of(20_000, false));
            let r = answer(&dir, &req, pipe);
            assert_eq!(r.matches("HTTP/1.1 200 OK\r\n").count(), 1, "{pipe}: {r}");
            assert!(r.contains(TOO_LARGE), "{pipe}: {r}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Symbolic links are followed only as far as the served directory: a link to a
    /// file outside it (or through a linked directory outside it) is 404, as a
    /// path with `..` is; a linked directory inside it is followed; a file that is
    /// itself a link is 404 wherever it leads (O_NOFOLLOW).
    #[test]
    fn symlinks_out_of_the_served_directory_are_refused() {
        let base = std::env::temp_dir().join(format!("mpstack-http-links-{}", std::process::id()));
        let www = base.join("www");
        std::fs::create_dir_all(www.join("sub")).unwrap();
        std::fs::write(base.join("secret.txt"), "secret\n").unwrap();
        std::fs::write(www.join("sub/page.txt"), "inside\n").unwrap();
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, www.join(name)).unwrap();
        };
        link("../secret.txt", "out.txt");
        link(base.join("secret.txt").to_str().unwrap(), "abs.txt");
        link("..", "up");
        link("sub/page.txt", "in.html");
        link("sub", "linked");
        for path in [
            "/out.txt",
            "/abs.txt",
            "/up/secret.txt",
            "/in.html",
            "/up/www/in.html",
        ] {
            let r = respond_to(&www, &Method::GET, path);
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        }
        // Where the directories' links lead is what counts: out and back in is
        // inside.
        for path in ["/linked/page.txt", "/sub/page.txt", "/up/www/sub/page.txt"] {
            let r = respond_to(&www, &Method::GET, path);
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            assert_eq!(r.headers()[CONTENT_LENGTH], "7", "{path}");
        }
        let r = respond_to(&www, &Method::GET, "/sub/page.txt");
        assert_eq!(r.headers()[CONTENT_TYPE], "text/plain; charset=utf-8");
        // The served directory may itself be reached through a link.
        std::os::unix::fs::symlink(&www, base.join("www-link")).unwrap();
        let r = respond_to(&base.join("www-link"), &Method::GET, "/sub/page.txt");
        assert_eq!(r.status(), StatusCode::OK);
        let r = respond_to(&base.join("www-link"), &Method::GET, "/out.txt");
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn responses_follow_the_old_server() {
        let dir = std::env::temp_dir().join(format!("mpstack-http-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), "<h1>x</h1>\n").unwrap();
        let r = respond_to(&dir, &Method::GET, "/");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[CONTENT_LENGTH], "11");
        assert_eq!(r.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        let r = respond_to(&dir, &Method::HEAD, "/index.html");
        assert_eq!(r.headers()[CONTENT_LENGTH], "11");
        assert!(r.body().is_end_stream());
        assert_eq!(
            respond_to(&dir, &Method::GET, "/nothing").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            respond_to(&dir, &Method::GET, "/../etc/passwd").status(),
            StatusCode::NOT_FOUND
        );
        let r = respond_to(&dir, &Method::DELETE, "/");
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[ALLOW], "GET, HEAD");
        assert_eq!(r.headers()[CONNECTION], "close");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A dotfile, or a file in a dot-directory, is not served; a FIFO, a
    /// directory without an index and a file that is a link are 404 at once (the
    /// FIFO has no writer: an open that waited for one would never return).
    #[test]
    fn dotfiles_fifos_and_linked_files_are_not_served() {
        let dir = std::env::temp_dir().join(format!("mpstack-http-dot-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        std::fs::write(dir.join(".htpasswd"), "admin:x\n").unwrap();
        std::fs::write(dir.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(dir.join("page.txt"), "page\n").unwrap();
        std::os::unix::fs::symlink("page.txt", dir.join("alias.txt")).unwrap();
        assert!(std::process::Command::new("mkfifo")
            .arg(dir.join("pipe"))
            .status()
            .unwrap()
            .success());
        let t = std::time::Instant::now();
        for path in [
            "/.htpasswd",
            "/.git/config",
            "/sub/../.htpasswd",
            "/pipe",
            "/empty",
            "/alias.txt",
        ] {
            let r = respond_to(&dir, &Method::GET, path);
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
        }
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        assert_eq!(
            respond_to(&dir, &Method::GET, "/page.txt").status(),
            StatusCode::OK
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
