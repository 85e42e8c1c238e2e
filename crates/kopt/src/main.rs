//! `kopt`: thin entry point; the command line lives in the library.

fn main() -> std::process::ExitCode {
    kopt::signals::install();
    let code = kopt::run(std::env::args_os());
    // A signal ended the work: say so in the exit code, as a shell would.
    match kopt::signals::received() {
        Some(sig) => std::process::ExitCode::from((128 + sig).clamp(0, 255) as u8),
        None => std::process::ExitCode::from(code),
    }
}
