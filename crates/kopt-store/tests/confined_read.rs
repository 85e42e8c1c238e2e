//! #39: a file a client names (an MCP resource) is read only when its real
//! path lies inside the allowed folder, it is a regular file, and it is no
//! larger than the cap; a symlink out, a FIFO or a device is refused
//! without blocking.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;

use kopt_store::confined::read_inside;

fn within_5s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .expect("blocked for more than 5 s")
}

fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn a_symlink_out_of_the_root_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("runs");
    std::fs::create_dir_all(root.join("r1")).unwrap();
    std::fs::write(d.path().join("secret.txt"), "outside").unwrap();
    symlink(d.path().join("secret.txt"), root.join("r1/report.json")).unwrap();
    let e = read_inside(&root, &root.join("r1/report.json"), 1 << 20).unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
}

#[test]
fn fifos_and_devices_are_refused_without_blocking() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().to_path_buf();
    mkfifo(&root.join("fifo"));
    let r = root.clone();
    let e = within_5s(move || {
        read_inside(&r, &r.join("fifo"), 1 << 20)
            .unwrap_err()
            .to_string()
    });
    assert!(e.contains("not a regular file"), "{e}");
    symlink("/dev/zero", root.join("zero")).unwrap();
    let r = root.clone();
    let e = within_5s(move || {
        read_inside(&r, &r.join("zero"), 1 << 20)
            .unwrap_err()
            .to_string()
    });
    assert!(e.contains("outside"), "{e}");
    // A device inside the root (the root is /dev) is refused by kind.
    let e = within_5s(|| {
        read_inside(Path::new("/dev"), Path::new("/dev/zero"), 1 << 20)
            .unwrap_err()
            .to_string()
    });
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn files_over_the_cap_are_refused_and_plain_ones_read() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::write(root.join("big"), vec![b'x'; 2048]).unwrap();
    let e = read_inside(root, &root.join("big"), 1024).unwrap_err();
    assert!(e.to_string().contains("1024"), "{e}");
    std::fs::write(root.join("ok.json"), "{}").unwrap();
    symlink(root.join("ok.json"), root.join("link.json")).unwrap();
    assert_eq!(
        read_inside(root, &root.join("link.json"), 1024).unwrap(),
        b"{}"
    );
}
