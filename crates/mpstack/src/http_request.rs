//! The HTTP service's path resolution: which file under the served directory a
//! request's path (as hyper parsed it, from the network) names, and whether, its
//! symbolic links followed, it is still under that directory; kept in the library
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

/// Where `file` (as [`resolve`] named it under `root`) really is, every symbolic
/// link followed (`realpath`), if that lies inside `root` (its own links followed
/// too): a link inside the directory to a file inside it leads to that file; one
/// that leads out of it (to a file, or through a directory) gives `None`, as a path
/// with `..` does, and so does a file that does not exist. Only the directory's
/// owner can change where a link leads between this and the open.
pub fn confine(root: &Path, file: &Path) -> Option<PathBuf> {
    let file = file.canonicalize().ok()?;
    let root = root.canonicalize().ok()?;
    file.starts_with(&root).then_some(file)
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
