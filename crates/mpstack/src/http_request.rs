//! The HTTP service's request parsing: what `mpstack run --serve http=DIR` reads from
//! the network, kept in the library so the fuzz targets reach it.

use std::path::{Component, Path, PathBuf};

/// What a request asked for.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub keep_alive: bool,
}

/// Parses a request head (up to and excluding the blank line).
pub fn parse(head: &str) -> Result<Request, u16> {
    let mut lines = head.split("\r\n");
    let line = lines.next().ok_or(400u16)?;
    let mut parts = line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) => (m, t, v),
        _ => return Err(400),
    };
    let http11 = match version {
        "HTTP/1.1" => true,
        "HTTP/1.0" => false,
        _ => return Err(505),
    };
    let mut keep_alive = http11;
    for h in lines.filter(|h| !h.is_empty()) {
        let Some((name, value)) = h.split_once(':') else {
            return Err(400);
        };
        if name.eq_ignore_ascii_case("connection") {
            let v = value.trim().to_ascii_lowercase();
            if v.contains("close") {
                keep_alive = false;
            } else if v.contains("keep-alive") {
                keep_alive = true;
            }
        }
    }
    let path = target.split(['?', '#']).next().unwrap_or("/").to_string();
    if !path.starts_with('/') {
        return Err(400);
    }
    Ok(Request {
        method: method.to_string(),
        path,
        keep_alive,
    })
}

/// The file under `root` that `path` names, if it stays inside `root`.
pub fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let rel = Path::new(path.trim_start_matches('/'));
    let mut out = root.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if out.is_dir() {
        out.push("index.html");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        let r = parse("GET /a/b.txt?x=1 HTTP/1.1\r\nHost: x\r\n").unwrap();
        assert_eq!(
            r,
            Request {
                method: "GET".into(),
                path: "/a/b.txt".into(),
                keep_alive: true
            }
        );
        assert!(!parse("GET / HTTP/1.0\r\nHost: x").unwrap().keep_alive);
        assert!(
            parse("GET / HTTP/1.0\r\nConnection: Keep-Alive")
                .unwrap()
                .keep_alive
        );
        assert!(
            !parse("GET / HTTP/1.1\r\nConnection: close")
                .unwrap()
                .keep_alive
        );
        assert_eq!(parse("GET / HTTP/2.0"), Err(505));
        assert_eq!(parse("GET /"), Err(400));
        assert_eq!(parse("GET / HTTP/1.1\r\nno colon here"), Err(400));
        assert_eq!(parse("GET relative HTTP/1.1"), Err(400));
    }

    #[test]
    fn paths_stay_inside_the_root() {
        let root = Path::new("/srv/www");
        assert_eq!(
            resolve(root, "/a/b.txt"),
            Some(PathBuf::from("/srv/www/a/b.txt"))
        );
        assert_eq!(resolve(root, "/../etc/passwd"), None);
        assert_eq!(resolve(root, "/a/../../x"), None);
        assert_eq!(resolve(root, "/./a"), Some(PathBuf::from("/srv/www/a")));
    }
}
