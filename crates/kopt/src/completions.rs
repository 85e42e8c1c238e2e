//! `kopt completions SHELL` and `kopt man`: generated from the same clap
//! definition the parser uses, so they never drift from the flags.

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;
use crate::exit::Failure;

/// Write `shell`'s completion script for `kopt` to stdout.
pub fn completions(shell: Shell) -> Result<(), Failure> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "kopt", &mut out);
    write_stdout(&out)
}

/// Write the man page (roff, section 1) to stdout; its header carries
/// kopt's version and the build's date.
pub fn man(command: Option<&str>) -> Result<(), Failure> {
    let mut out = Vec::new();
    let cli = Cli::command();
    let page = match command {
        None => cli,
        Some(name) => {
            let names: Vec<String> = cli
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            let Some(sub) = cli.find_subcommand(name) else {
                return Err(Failure::Error(kopt_engine::Error::Usage(format!(
                    "no command '{}': man pages exist for {}",
                    name.escape_default(),
                    names.join(", ")
                ))));
            };
            // The page kopt(1) names: kopt-COMMAND(1).
            // Leaked once per process: clap names are &'static str here.
            let full: &'static str = Box::leak(format!("kopt-{}", sub.get_name()).into_boxed_str());
            sub.clone().name(full).bin_name(full)
        }
    };
    clap_mangen::Man::new(page)
        .date(env!("KOPT_BUILD_DATE"))
        .source(format!("kopt {}", env!("CARGO_PKG_VERSION")))
        .manual("kopt manual")
        .render(&mut out)
        .map_err(|e| Failure::Error(kopt_engine::Error::Output(format!("man page: {e}"))))?;
    write_stdout(&out)
}

/// A closed pipe (`kopt man | head`) is not an error.
fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::Error(
            kopt_engine::Error::Output(format!("stdout: {e}")),
        )),
        _ => Ok(()),
    }
}
