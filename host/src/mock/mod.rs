//! The scriptable mock upstream (`polygateway mock-upstream`): an OpenAI-compatible fake
//! used by the tests, the README demo and the benchmark. Scenarios are addressed by path
//! (`/sc/<name>/v1/chat/completions`, or `/v1/chat/completions` for `default`), scripted
//! with `PUT /_mock/scenarios/<name>` and inspected with `GET /_mock/scenarios/<name>/hits`.

mod script;
mod server;

pub use script::{Script, Step};
pub use server::{MockUpstream, serve_mock};
