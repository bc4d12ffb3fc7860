//! The kit's results: one outcome per case, a per-case recorder that times every plugin
//! call against the budget, readable JSON differences, and the test-runner style output.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use super::World;
use crate::plugin::PluginError;
use crate::plugin::schedule::{take_off_thread_cpu, thread_cpu};

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// `group::case`, e.g. `requests::extra_body_is_merged`.
    pub name: String,
    /// `None` when the case passed; else what differed, one problem per line.
    pub failure: Option<String>,
}

/// The slowest plugin call of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowestCall {
    /// The case it belonged to.
    pub case: String,
    /// The WIT function, e.g. `parse-response`.
    pub function: &'static str,
    /// How long it took.
    pub elapsed: Duration,
}

/// Everything a check found.
#[derive(Debug, Clone)]
pub struct Report {
    /// The component checked (a path or `builtin:<name>`).
    pub origin: String,
    /// The world it was checked against.
    pub world: World,
    /// The `describe` name, once loaded.
    pub plugin: Option<String>,
    /// The contract version it exports, once loaded.
    pub contract_version: Option<String>,
    /// Every case, in order.
    pub cases: Vec<CaseResult>,
    /// Plugin calls made.
    pub calls: u64,
    /// The slowest of them.
    pub slowest: Option<SlowestCall>,
    /// The per-call time budget the run enforced.
    pub budget: Duration,
    /// Compiling and loading the component (compile, link, instantiate, `describe`).
    pub load_time: Duration,
}

impl Report {
    pub(crate) fn new(origin: &str, world: World, budget: Duration) -> Self {
        Self {
            origin: origin.to_string(),
            world,
            plugin: None,
            contract_version: None,
            cases: Vec::new(),
            calls: 0,
            slowest: None,
            budget,
            load_time: Duration::ZERO,
        }
    }

    /// Cases that passed.
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.failure.is_none()).count()
    }

    /// Cases that failed.
    pub fn failed(&self) -> usize {
        self.cases.len() - self.passed()
    }

    /// True when every case passed.
    pub fn success(&self) -> bool {
        self.failed() == 0 && !self.cases.is_empty()
    }

    /// The failed cases.
    pub fn failures(&self) -> impl Iterator<Item = &CaseResult> {
        self.cases.iter().filter(|c| c.failure.is_some())
    }

    /// Start a case; finish it with [`Report::finish`].
    pub(crate) fn case(&self, name: impl Into<String>) -> Case {
        Case {
            name: name.into(),
            problems: Vec::new(),
            budget: self.budget,
            calls: 0,
            slowest: None,
        }
    }

    /// Record a finished case.
    pub(crate) fn finish(&mut self, case: Case) {
        self.calls += case.calls;
        if let Some((function, elapsed)) = case.slowest
            && self.slowest.as_ref().is_none_or(|s| elapsed > s.elapsed)
        {
            self.slowest = Some(SlowestCall {
                case: case.name.clone(),
                function,
                elapsed,
            });
        }
        let failure = (!case.problems.is_empty()).then(|| case.problems.join("\n"));
        self.cases.push(CaseResult {
            name: case.name,
            failure,
        });
    }

    /// Write the run like a test runner: a header, one `test <case> ... ok|FAILED` line per
    /// case, the differences of the failed ones, and a summary line. With `timing`, the
    /// load time and the slowest call are detailed.
    pub fn render(&self, out: &mut dyn Write, timing: bool) -> std::io::Result<()> {
        writeln!(
            out,
            "checking {} against the {} world",
            self.origin, self.world
        )?;
        if let (Some(name), Some(version)) = (&self.plugin, &self.contract_version) {
            writeln!(
                out,
                "  plugin `{name}`, contract {version}; budget {} ms per call",
                self.budget.as_millis()
            )?;
        }
        if timing {
            writeln!(
                out,
                "  loaded in {:.1} ms (compile or cache lookup, link, instantiate, describe)",
                ms(self.load_time)
            )?;
        }
        writeln!(out)?;
        writeln!(out, "running {} cases", self.cases.len())?;
        for c in &self.cases {
            let verdict = if c.failure.is_some() { "FAILED" } else { "ok" };
            writeln!(out, "test {} ... {verdict}", c.name)?;
        }
        if self.failed() > 0 {
            writeln!(out)?;
            writeln!(out, "failures:")?;
            for c in self.failures() {
                writeln!(out)?;
                writeln!(out, "---- {} ----", c.name)?;
                for line in c.failure.as_deref().unwrap_or_default().lines() {
                    writeln!(out, "    {line}")?;
                }
            }
            writeln!(out)?;
            writeln!(out, "failures:")?;
            for c in self.failures() {
                writeln!(out, "    {}", c.name)?;
            }
        }
        writeln!(out)?;
        let slowest = match &self.slowest {
            Some(s) => format!(
                "; slowest {:.1} ms ({} in {})",
                ms(s.elapsed),
                s.function,
                s.case
            ),
            None => String::new(),
        };
        writeln!(
            out,
            "test result: {}. {} passed; {} failed; {} plugin calls{slowest}",
            if self.success() { "ok" } else { "FAILED" },
            self.passed(),
            self.failed(),
            self.calls,
        )?;
        Ok(())
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One case being run: its problems, and the timing of its plugin calls.
pub(crate) struct Case {
    pub(crate) name: String,
    problems: Vec<String>,
    budget: Duration,
    calls: u64,
    slowest: Option<(&'static str, Duration)>,
}

impl Case {
    /// Note a problem (the case fails).
    pub(crate) fn fail(&mut self, problem: impl Into<String>) {
        self.problems.push(problem.into());
    }

    /// Raise the per-call budget of this case (never lowers it).
    pub(crate) fn allow(&mut self, budget: Duration) {
        self.budget = self.budget.max(budget);
    }

    /// Whether a problem was noted.
    pub(crate) fn failed(&self) -> bool {
        !self.problems.is_empty()
    }

    /// Run one plugin call, timing it against the budget. A plugin fault (trap, exhausted
    /// time budget, memory cap) is noted as a problem and gives `None`.
    ///
    /// The time is the CPU time the call used, as the engine's own budget counts it
    /// (`plugin/schedule.rs`): this thread's CPU clock around the call plus what its slow
    /// part used on the slow-call thread, so it measures the plugin's work alone, and a
    /// loaded machine (a parallel test run, a build) never fails a case a quiet one passes.
    pub(crate) fn call<R>(
        &mut self,
        function: &'static str,
        f: impl FnOnce() -> Result<R, PluginError>,
    ) -> Option<R> {
        let started = thread_cpu();
        take_off_thread_cpu();
        let out = f();
        let elapsed = thread_cpu().saturating_sub(started) + take_off_thread_cpu();
        self.calls += 1;
        if self.slowest.is_none_or(|(_, s)| elapsed > s) {
            self.slowest = Some((function, elapsed));
        }
        if elapsed > self.budget {
            self.fail(format!(
                "{function} took {:.1} ms, over the budget of {} ms per call",
                ms(elapsed),
                self.budget.as_millis()
            ));
        }
        match out {
            Ok(r) => Some(r),
            Err(e) => {
                self.fail(format!("plugin fault (a trap is never an answer): {e}"));
                None
            }
        }
    }
}

/// Compact JSON for messages, shortened past `max` characters.
pub(crate) fn show(v: &Value) -> String {
    shorten(&v.to_string(), 160)
}

/// `s`, cut to `max` characters with an ellipsis and the full length.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    format!("{head}… ({n} chars)")
}

/// The differences between two JSON values, one line each, with JSON paths
/// (`body.metadata.team: expected "a", got "b"`).
pub(crate) fn json_diff(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => json_diff(&p, ev, av, out),
                    None => out.push(format!("{p}: expected {}, but it is missing", show(ev))),
                }
            }
            for (k, av) in a {
                if !e.contains_key(k) {
                    out.push(format!("{path}.{k}: unexpected, got {}", show(av)));
                }
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                json_diff(&format!("{path}[{i}]"), ev, av, out);
            }
        }
        _ if expected == actual => {}
        _ => out.push(format!(
            "{path}: expected {}, got {}",
            show(expected),
            show(actual)
        )),
    }
}

/// A readable difference between two delta lists (golden encoding): the first position
/// where they differ, with a little context from each side.
pub(crate) fn delta_list_diff(expected: &[Value], actual: &[Value]) -> Option<String> {
    if expected == actual {
        return None;
    }
    let first = expected
        .iter()
        .zip(actual)
        .position(|(e, a)| e != a)
        .unwrap_or(expected.len().min(actual.len()));
    let mut lines = vec![format!(
        "deltas differ from #{first} (expected {} deltas, got {}):",
        expected.len(),
        actual.len()
    )];
    if first > 0 {
        lines.push(format!(
            "    #{}  {}",
            first - 1,
            show(&expected[first - 1])
        ));
    }
    for i in first..(first + 4) {
        match (expected.get(i), actual.get(i)) {
            (None, None) => break,
            (e, a) if e == a => {
                if let Some(e) = e {
                    lines.push(format!("    #{i}  {}", show(e)));
                }
            }
            (e, a) => {
                lines.push(match e {
                    Some(e) => format!("  - #{i}  {}", show(e)),
                    None => format!("  - #{i}  (nothing)"),
                });
                lines.push(match a {
                    Some(a) => format!("  + #{i}  {}", show(a)),
                    None => format!("  + #{i}  (nothing)"),
                });
            }
        }
    }
    lines.push("  (- expected, + got)".to_string());
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn json_diff_names_paths() {
        let mut out = Vec::new();
        json_diff(
            "body",
            &json!({"model": "m", "meta": {"a": 1}, "gone": true}),
            &json!({"model": "x", "meta": {"a": 2}, "extra": 1}),
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                "body.gone: expected true, but it is missing",
                "body.meta.a: expected 1, got 2",
                "body.model: expected \"m\", got \"x\"",
                "body.extra: unexpected, got 1",
            ]
        );
    }

    #[test]
    fn delta_list_diff_shows_the_first_difference() {
        let e = vec![
            json!({"role": "assistant"}),
            json!({"content": "a"}),
            json!("done"),
        ];
        let a = vec![json!({"role": "assistant"}), json!({"content": "b"})];
        let d = delta_list_diff(&e, &a).unwrap();
        assert_eq!(
            d,
            "deltas differ from #1 (expected 3 deltas, got 2):\n    #0  {\"role\":\"assistant\"}\n  - #1  {\"content\":\"a\"}\n  + #1  {\"content\":\"b\"}\n  - #2  \"done\"\n  + #2  (nothing)\n  (- expected, + got)"
        );
        assert_eq!(delta_list_diff(&e, &e), None);
    }
}
