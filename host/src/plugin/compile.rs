//! Where components are compiled: in this process, or in a short-lived child process of the
//! same executable, so the serving process never runs Cranelift.
//!
//! Why a child: compiling the built-in components at start-up leaves the compiler's heap
//! (freed, but kept by the allocator) and the compiler's machine code resident for the life
//! of the process. Measured on `polygateway serve` with one source, 3 s after start-up
//! (`VmRSS`, `RssAnon`, `RssFile` of `/proc/<pid>/status`, release build, two starts each):
//! compiling in-process 47.6 / 49.1 MiB (anonymous 18.0 / 19.7, file-backed 29.6 / 29.4);
//! compiling in a child 30.0 / 29.5 MiB (anonymous 4.7 / 4.7, file-backed 25.2 / 24.7).
//! A child compiles one component (`polygateway __compile-component`), writes wasmtime's
//! serialized artifact to its stdout and exits; the parent only deserializes it, which maps
//! the machine code and runs no compiler.
//!
//! The protocol, parent → child: the component's bytes on stdin, then end of file; the
//! options `--len` (how many bytes the parent sends; the child reads no more) and
//! `--cache-dir` (the parent's `PGW_PLUGIN_CACHE_DIR`, so the child reads and fills the same
//! compile cache). Child → parent: exit 0 with the artifact on stdout; exit [`EXIT_INVALID`]
//! with the compile error on stderr when the bytes are not a valid component; anything else
//! is a failure of the child itself (it could not start, was killed, the executable was
//! replaced by another version), and the parent then compiles in-process, as it would
//! without a child, and logs why.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a [`super::PluginEngine`] compiles components.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Compiler {
    /// In this process (the default; what an embedding application gets).
    #[default]
    InProcess,
    /// In a child process: `program` (this executable, `std::env::current_exe()`) run as
    /// `program __compile-component`. `polygateway serve` uses it.
    Subprocess {
        /// The executable that serves `__compile-component`.
        program: PathBuf,
    },
}

/// The hidden subcommand the child runs.
pub const COMPILE_SUBCOMMAND: &str = "__compile-component";

/// The child's exit code when the bytes are not a valid component.
pub const EXIT_INVALID: u8 = 2;

/// How compiling in a child ended, when it did not give a component.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChildCompileError {
    /// The bytes are not a valid component: the child's compile error.
    #[error("{0}")]
    Invalid(String),
    /// The child failed for a reason of its own; compiling in-process is the fallback.
    #[error("the compiler process failed: {0}")]
    Child(String),
}

/// Compile `bytes` in a child process running `program`, and load its artifact into `engine`.
///
/// Errors: [`ChildCompileError::Invalid`] with the compile error when the bytes are not a
/// component; [`ChildCompileError::Child`] when the child could not do its work (spawn,
/// I/O, signal, an artifact this engine refuses).
pub(crate) fn in_child(
    engine: &Engine,
    program: &Path,
    cache_dir: Option<&Path>,
    bytes: &[u8],
) -> Result<Component, ChildCompileError> {
    let child_err = |what: &str, e: &dyn std::fmt::Display| {
        ChildCompileError::Child(format!("{what} {}: {e}", program.display()))
    };
    let mut cmd = Command::new(program);
    cmd.arg(COMPILE_SUBCOMMAND)
        .arg("--len")
        .arg(bytes.len().to_string());
    if let Some(dir) = cache_dir {
        cmd.arg("--cache-dir").arg(dir);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| child_err("cannot start", &e))?;
    let Some(mut stdin) = child.stdin.take() else {
        return Err(ChildCompileError::Child(
            "no stdin pipe to the child".into(),
        ));
    };
    // The child reads all of stdin before it writes anything, but a child that fails early
    // writes to stderr and exits: write from another thread so neither side waits on a
    // full pipe.
    let output = std::thread::scope(|s| {
        let writer = s.spawn(move || stdin.write_all(bytes));
        let output = child.wait_with_output();
        (writer.join(), output)
    });
    let output = match output {
        (_, Err(e)) => return Err(child_err("cannot read the output of", &e)),
        (_, Ok(o)) => o,
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {}
        Some(code) if code == i32::from(EXIT_INVALID) => {
            return Err(ChildCompileError::Invalid(stderr.trim_end().to_string()));
        }
        _ => {
            return Err(ChildCompileError::Child(format!(
                "{} {COMPILE_SUBCOMMAND} ended with {}: {}",
                program.display(),
                output.status,
                stderr.trim_end()
            )));
        }
    }
    #[allow(unsafe_code)]
    // SAFETY: the artifact was made by `Component::serialize` in a child running this
    // executable (the parent chose `program`: `current_exe()`), passed through a pipe this
    // process owns; nothing else writes to it. wasmtime checks its header (wasmtime version,
    // engine configuration, target) and refuses an artifact of another build, which is then
    // a `Child` error and the caller compiles in-process instead.
    let component = unsafe { Component::deserialize(engine, &output.stdout) };
    component.map_err(|e| child_err("cannot load the artifact of", &format!("{e:#}")))
}

/// The child's side: read a component of `len` bytes from stdin, compile it with an engine
/// configured as the parent's ([`super::PluginEngine::new`]), write the artifact to stdout.
/// Exit 0, [`EXIT_INVALID`] for bytes that are not a component, 1 for anything else (stdin
/// not exactly `len` bytes, an engine that cannot start, an unwritable stdout).
pub fn serve_child(len: u64, cache_dir: Option<PathBuf>) -> ExitCode {
    let fail = |code: u8, message: &str| {
        let _ = writeln!(std::io::stderr(), "{message}");
        ExitCode::from(code)
    };
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin()
        .lock()
        .take(len.saturating_add(1))
        .read_to_end(&mut bytes)
    {
        return fail(1, &format!("cannot read the component from stdin: {e}"));
    }
    if bytes.len() as u64 != len {
        return fail(
            1,
            &format!("expected {len} bytes on stdin, got {}", bytes.len()),
        );
    }
    let engine = match super::PluginEngine::new(super::PluginLimits::default(), cache_dir) {
        Ok(e) => e,
        Err(e) => return fail(1, &e.to_string()),
    };
    let artifact = match Component::new(&engine.engine, &bytes) {
        Ok(c) => c.serialize(),
        Err(e) => return fail(EXIT_INVALID, &format!("{e:#}")),
    };
    let artifact = match artifact {
        Ok(a) => a,
        Err(e) => {
            return fail(
                1,
                &format!("cannot serialize the compiled component: {e:#}"),
            );
        }
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(&artifact).and_then(|()| out.flush()) {
        return fail(1, &format!("cannot write the artifact to stdout: {e}"));
    }
    ExitCode::SUCCESS
}
