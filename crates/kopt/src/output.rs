//! Where a report goes: standard output, or a file replaced atomically so an
//! earlier report is never left half-written.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

pub fn write_report(
    path: Option<&Path>,
    render: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    match path {
        None => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            render(&mut lock)?;
            lock.flush()?;
            Ok(())
        }
        Some(path) => {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let tmp = dir.join(format!(".{name}.kopt-tmp-{}", std::process::id()));
            let result = (|| -> anyhow::Result<()> {
                let mut f = std::fs::File::create(&tmp)
                    .with_context(|| format!("{}: cannot create", tmp.display()))?;
                render(&mut f).with_context(|| format!("{}: cannot write", tmp.display()))?;
                f.sync_all()?;
                std::fs::rename(&tmp, path)
                    .with_context(|| format!("{}: cannot replace", path.display()))
            })();
            if result.is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
            result
        }
    }
}
