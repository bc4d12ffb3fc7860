//! The `polygateway` binary: a thin shell over `polygateway::cli`.

fn main() -> std::process::ExitCode {
    polygateway::cli::run()
}
