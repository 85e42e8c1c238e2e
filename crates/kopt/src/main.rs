//! `kopt`: thin entry point; the command line lives in the library.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(kopt::run(std::env::args_os()))
}
