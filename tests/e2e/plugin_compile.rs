//! Compiling components in a child process (`Compiler::Subprocess`, what `polygateway serve`
//! uses): the child's artifact loads and runs; bytes that are not a component get the same
//! error as an in-process compile; a child that cannot run falls back to compiling
//! in-process; the child fills and reads the compile cache; the child's protocol refuses a
//! short stdin.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use polygateway::config::FirstParty;
use polygateway::plugin::{
    Compiler, PluginEngine, PluginLimits, ProviderComponent, builtin_provider_bytes,
};

fn polygateway() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_polygateway"))
}

fn engine_compiling_in(program: PathBuf, cache: Option<PathBuf>) -> PluginEngine {
    PluginEngine::new(PluginLimits::default(), cache)
        .unwrap()
        .with_compiler(Compiler::Subprocess { program })
}

#[test]
fn a_component_compiled_in_a_child_loads_and_runs() {
    let engine = engine_compiling_in(polygateway(), None);
    for p in [FirstParty::OpenAi, FirstParty::Anthropic] {
        // Loading calls the guest's `describe`: the artifact's code runs in this process.
        let c = ProviderComponent::load(&engine, p.name(), builtin_provider_bytes(p)).unwrap();
        assert_eq!(c.info().name, p.name());
        assert_eq!(c.contract_version(), "0.2.0");
        assert_eq!(c.faults(), 0);
    }
    assert_eq!(
        engine.in_process_compiles(),
        0,
        "a child failed: compiled here"
    );
}

#[test]
fn bytes_that_are_not_a_component_get_the_in_process_compile_error() {
    let child = engine_compiling_in(polygateway(), None);
    let local = PluginEngine::new(PluginLimits::default(), None).unwrap();
    for bytes in [&b"\0asm garbage"[..], b"not wasm at all", b""] {
        let from_child = ProviderComponent::load(&child, "junk.wasm", bytes).unwrap_err();
        let from_here = ProviderComponent::load(&local, "junk.wasm", bytes).unwrap_err();
        assert_eq!(from_child.to_string(), from_here.to_string());
        assert!(
            from_child
                .to_string()
                .starts_with("cannot load plugin junk.wasm: "),
            "{from_child}"
        );
    }
    assert_eq!(
        child.in_process_compiles(),
        0,
        "the child's error was not the one shown"
    );
    assert_eq!(local.in_process_compiles(), 3);
}

#[test]
fn a_child_that_cannot_run_falls_back_to_compiling_in_process() {
    // No such executable; then an executable that is not polygateway (exits 1 on the
    // unknown subcommand).
    for program in [
        PathBuf::from("/nonexistent/polygateway"),
        PathBuf::from("/bin/false"),
    ] {
        let engine = engine_compiling_in(program, None);
        let p = FirstParty::OpenAi;
        let c = ProviderComponent::load(&engine, p.name(), builtin_provider_bytes(p)).unwrap();
        assert_eq!(c.info().name, "openai");
        assert_eq!(engine.in_process_compiles(), 1);
    }
}

/// The compiled artifacts in wasmtime's cache under `dir` (under `modules/`: not its clean-up
/// worker's markers).
fn cache_files(dir: &std::path::Path) -> Vec<PathBuf> {
    crate::plugin_fixtures::cache_files(&dir.join("modules"))
}

#[test]
fn the_child_fills_the_compile_cache_and_its_artifact_loads_from_it() {
    let cache = tempfile::tempdir().unwrap();
    let engine = engine_compiling_in(polygateway(), Some(cache.path().to_path_buf()));
    let p = FirstParty::Gemini;
    ProviderComponent::load(&engine, p.name(), builtin_provider_bytes(p)).unwrap();
    let files = cache_files(cache.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let stored = std::fs::metadata(&files[0]).unwrap().modified().unwrap();
    // A second engine's child finds it there: the entry is read, not written again.
    let again = engine_compiling_in(polygateway(), Some(cache.path().to_path_buf()));
    let c = ProviderComponent::load(&again, p.name(), builtin_provider_bytes(p)).unwrap();
    assert_eq!(c.info().name, "gemini");
    assert_eq!(
        engine.in_process_compiles() + again.in_process_compiles(),
        0
    );
    assert_eq!(cache_files(cache.path()), files);
    assert_eq!(
        std::fs::metadata(&files[0]).unwrap().modified().unwrap(),
        stored
    );
}

#[test]
fn the_child_refuses_a_stdin_that_is_not_the_announced_length() {
    let bytes = builtin_provider_bytes(FirstParty::OpenAi);
    for (announced, sent) in [
        (bytes.len() + 1, bytes.len()),
        (bytes.len() - 1, bytes.len()),
    ] {
        let mut child = Command::new(polygateway())
            .args(["__compile-component", "--len", &announced.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The child may stop reading after `announced + 1` bytes: a broken pipe is fine.
        let _ = child.stdin.take().unwrap().write_all(&bytes[..sent]);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        let got = sent.min(announced + 1);
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("expected {announced} bytes on stdin, got {got}\n")
        );
    }
}
