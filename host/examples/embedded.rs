//! Embedding PolyGateway in a Rust program: one governed chat call, no proxy, no network
//! beyond a mock upstream started in-process.
//!
//! Runnable: `cargo run -p polygateway --example embedded`
//!
//! The same `Gateway` runs behind `polygateway serve`; here the program owns it. Settings
//! come from explicit variables (the same keys as the environment, see
//! docs/configuration.md#only-config-reads-the-environment), so nothing is read from `.env`
//! or the process environment.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;

use polygateway::{ChatRequest, Gateway};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A scriptable OpenAI-compatible fake upstream on a free loopback port. Its `default`
    // scenario answers "Hello from the mock upstream." with usage.
    let mock = polygateway::mock::serve_mock(SocketAddr::from(([127, 0, 0, 1], 0)), HashMap::new())
        .await?;

    // One scope `LLM` (client alias `llm`) with one source served by the built-in `openai`
    // provider component. Telemetry is off (and no PGW_PLUGIN_CACHE_DIR is set), so the
    // example writes no files.
    let vars = [
        ("LLM__OPENAI__1__BASE_URL", mock.base_url("default")),
        ("LLM__OPENAI__1__MODEL", "gpt-4o-mini".to_owned()),
        ("LLM__OPENAI__1__API_KEY", "sk-example".to_owned()),
        ("PGW_TELEMETRY_BACKEND", "none".to_owned()),
    ];
    let settings = polygateway::config::settings_from_vars(vars.map(|(k, v)| (k.to_owned(), v)))?;

    // Loads the plugin components, builds the HTTP clients. Share one per process.
    let gateway = Gateway::from_settings(settings).await?;

    // One call to its end: source selection, retries and failover happen inside.
    let answer = gateway.chat(ChatRequest::user("llm", "Hello")).await?;

    let mut out = std::io::stdout().lock();
    writeln!(out, "content:      {}", answer.content)?;
    match answer.usage {
        Some(u) => writeln!(
            out,
            "usage:        {} prompt + {} completion tokens",
            u.prompt_tokens, u.completion_tokens
        )?,
        None => writeln!(out, "usage:        not reported")?,
    }
    writeln!(out, "usage_source: {}", answer.usage_source.as_str())?;
    writeln!(out, "source_name:  {}", answer.source_name)?;
    writeln!(out, "call_id:      {}", answer.call_id)?;
    writeln!(out, "latency_ms:   {}", answer.latency_ms)?;
    match answer.ttft_ms {
        Some(ms) => writeln!(out, "ttft_ms:      {ms:.1}")?,
        None => writeln!(out, "ttft_ms:      n/a")?,
    }
    Ok(())
}
