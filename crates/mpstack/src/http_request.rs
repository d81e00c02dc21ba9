//! The HTTP service's path resolution: which file under the served directory a
//! request's path (as hyper parsed it, from the network) names, kept in the library
//! so the fuzz targets reach it.

use std::path::{Component, Path, PathBuf};

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
