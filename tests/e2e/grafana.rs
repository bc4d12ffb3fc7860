//! The Grafana dashboard of `examples/grafana/` against a real gateway's `/metrics`: every
//! query of every panel and every template variable is parsed with a PromQL parser, and each
//! series it selects must be one the gateway exports, read the way its type allows (counters
//! and histogram buckets through `rate()`/`increase()`, quantiles keeping `le`), matched and
//! grouped only by labels that series has. Also the dashboard's shape (unique panel ids,
//! every panel and query on the `DS_PROMETHEUS` data-source variable) and the scrape config
//! beside it; the checkers themselves are shown to fail on broken queries.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use promql_parser::label::{MatchOp, Matcher};
use promql_parser::parser::{self, Expr, LabelModifier, VectorMatchCardinality, VectorSelector};
use serde_json::{Value, json};

use crate::common::{gateway, kv, source};
use polygateway_tests::{GatewayProcess, eventually, hits, mock, repo_root, script};

const DASHBOARD: &str = "examples/grafana/polygateway-dashboard.json";
const SCRAPE_CONFIG: &str = "examples/grafana/prometheus.yml";

/// The data-source reference every panel, target and query variable must carry: the
/// dashboard's `DS_PROMETHEUS` variable, so it works on any Grafana whatever its data
/// source's uid.
const DATASOURCE_UID: &str = "${DS_PROMETHEUS}";

/// Labels Prometheus attaches to every scraped series itself (target labels): they are not
/// in the exposition, yet every stored series has them.
const TARGET_LABELS: &[&str] = &["instance", "job"];

/// Exported families the dashboard leaves out on purpose, each with the reason. A family
/// the gateway starts exporting must get a panel or a line here.
const NOT_CHARTED: &[(&str, &str)] = &[(
    "pgw_ocr_boxes_dropped_total",
    "OCR scopes only: layout boxes dropped by the numeric defence, a data-quality signal of \
     one provider rather than the gateway's health",
)];

/// Functions through which a counter (or a histogram's `_bucket`, `_sum`, `_count`) may be
/// read: anything else would chart a reset-prone running total.
const COUNTER_FUNCTIONS: &[&str] = &["rate", "irate", "increase"];

/// What Grafana's built-in variables stand for while a query is parsed.
const BUILTINS: &[(&str, &str)] = &[
    ("__rate_interval", "5m"),
    ("__interval", "1m"),
    ("__range", "6h"),
    ("__interval_ms", "60000"),
    ("__range_s", "21600"),
    ("__range_ms", "21600000"),
];

/// A dashboard variable stands for this (inside the regex of a matcher) while a query is
/// parsed; a matcher whose value holds it must be a regex matcher, since a multi-value
/// variable expands to `(a|b)`.
const VAR_MARK: &str = "__grafana_var_";

// ---------------------------------------------------------------------------------------
// The exposition.

/// How a series may be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Only ever grows (a counter, a histogram's or summary's parts except quantiles).
    Cumulative,
    /// Goes up and down (a gauge, a summary's quantiles, untyped).
    Instant,
}

/// What a `/metrics` scrape exports.
#[derive(Debug, Default)]
struct Exported {
    /// Series name → how it may be read, from the `# TYPE` lines (a histogram `h` as
    /// `h_bucket`, `h_sum` and `h_count`; a counter under its `_total` name, as the text
    /// format writes it).
    series: BTreeMap<String, Kind>,
    /// Family name (as in its `# TYPE` line) → its series names.
    families: BTreeMap<String, Vec<String>>,
    /// Series name → the label names seen on its samples (none: no sample in the scrape).
    labels: BTreeMap<String, BTreeSet<String>>,
}

impl Exported {
    /// Parse the Prometheus text format: the families from `# TYPE` lines, the label names
    /// from the samples. A sample's series (`name{label="value",…}`) is exactly a PromQL
    /// vector selector with `=` matchers (same names, same string escapes), so the PromQL
    /// parser reads it.
    fn parse(text: &str) -> Result<Self, String> {
        let mut out = Self::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut words = rest.split_whitespace();
                let (Some(name), Some(ty)) = (words.next(), words.next()) else {
                    return Err(format!("a `# TYPE` line without name and type: {line}"));
                };
                let parts: &[(&str, Kind)] = match ty {
                    "counter" => &[("", Kind::Cumulative)],
                    "gauge" | "untyped" | "unknown" => &[("", Kind::Instant)],
                    "histogram" => &[
                        ("_bucket", Kind::Cumulative),
                        ("_sum", Kind::Cumulative),
                        ("_count", Kind::Cumulative),
                    ],
                    "summary" => &[
                        ("", Kind::Instant),
                        ("_sum", Kind::Cumulative),
                        ("_count", Kind::Cumulative),
                    ],
                    other => return Err(format!("unknown metric type `{other}`: {line}")),
                };
                let names: Vec<String> = parts.iter().map(|(s, _)| format!("{name}{s}")).collect();
                for (series, (_, kind)) in names.iter().zip(parts) {
                    out.series.insert(series.clone(), *kind);
                }
                out.families.insert(name.to_string(), names);
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            // The series ends at the last `}` (a value or timestamp holds none), or at the
            // first blank without labels.
            let series = match (line.find('{'), line.rfind('}')) {
                (Some(_), Some(end)) => &line[..=end],
                _ => line.split_whitespace().next().unwrap_or(line),
            };
            let vs = match parser::parse(series) {
                Ok(Expr::VectorSelector(vs)) => vs,
                Ok(other) => return Err(format!("not a series: {line} (parsed as {other})")),
                Err(e) => return Err(format!("cannot parse the sample `{line}`: {e}")),
            };
            let Some(name) = vs.name.clone() else {
                return Err(format!("a sample without a metric name: {line}"));
            };
            if !out.series.contains_key(&name) {
                return Err(format!(
                    "the sample `{line}` belongs to no `# TYPE`d family"
                ));
            }
            out.labels
                .entry(name)
                .or_default()
                .extend(vs.matchers.matchers.iter().map(|m| m.name.clone()));
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------
// The queries.

/// Replace Grafana's variables in `query` by what the parser can read: built-in intervals
/// by durations, the dashboard's own variables (`$name`, `${name}`, `${name:format}`) by a
/// marker. A variable the dashboard does not define is an error.
fn substitute(query: &str, vars: &BTreeSet<String>) -> Result<String, String> {
    let mut out = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, len) = if let Some(braced) = after.strip_prefix('{') {
            let Some(end) = braced.find('}') else {
                return Err(format!("an unclosed `${{` in `{query}`"));
            };
            let inner = &braced[..end];
            (inner.split(':').next().unwrap_or(inner), end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() {
            // A `$` that names nothing (a regex anchor): keep it.
            out.push('$');
        } else if let Some((_, value)) = BUILTINS.iter().find(|(b, _)| *b == name) {
            out.push_str(value);
        } else if vars.contains(name) {
            out.push_str(&format!("{VAR_MARK}{name}"));
        } else {
            return Err(format!(
                "`${name}` is not a variable of the dashboard (it has {vars:?}) in `{query}`"
            ));
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The matchers of a selector (its `or` groups included).
fn matchers(vs: &VectorSelector) -> impl Iterator<Item = &Matcher> {
    vs.matchers
        .matchers
        .iter()
        .chain(vs.matchers.or_matchers.iter().flatten())
}

/// Checks the series of parsed queries against a scrape, gathering the problems.
struct Checker<'a> {
    exported: &'a Exported,
    /// Where the query being checked is (for the messages).
    place: String,
    problems: Vec<String>,
    /// Every series the checked queries select.
    used: BTreeSet<String>,
}

impl<'a> Checker<'a> {
    fn new(exported: &'a Exported) -> Self {
        Self {
            exported,
            place: String::new(),
            problems: Vec::new(),
            used: BTreeSet::new(),
        }
    }

    fn problem(&mut self, what: String) {
        self.problems.push(format!("{}: {what}", self.place));
    }

    /// The label names a query may use on `series`: those of its samples and Prometheus's
    /// target labels.
    fn has_label(&self, series: &str, label: &str) -> bool {
        TARGET_LABELS.contains(&label)
            || self
                .exported
                .labels
                .get(series)
                .is_some_and(|l| l.contains(label))
    }

    /// Check one PromQL query (Grafana variables already substituted).
    fn query(&mut self, place: &str, promql: &str) {
        self.place = place.to_string();
        match parser::parse(promql) {
            Ok(expr) => {
                self.expr(&expr, None);
            }
            Err(e) => self.problem(format!("not PromQL ({e}): {promql}")),
        }
    }

    /// Check a Grafana `label_values(selector, label)` variable query.
    fn label_values(&mut self, place: &str, query: &str) {
        self.place = place.to_string();
        let Some(inner) = query
            .trim()
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
        else {
            self.problem(format!(
                "not a `label_values(selector, label)` query: {query}"
            ));
            return;
        };
        let Some((selector, label)) = inner.rsplit_once(',') else {
            self.problem(format!(
                "`{query}` names no series: say which series the values come from"
            ));
            return;
        };
        let label = label.trim();
        match parser::parse(selector.trim()) {
            Ok(Expr::VectorSelector(vs)) => {
                if let Some(series) = self.selector(&vs, None, true)
                    && !self.has_label(&series, label)
                {
                    self.problem(format!("`{series}` has no label `{label}`"));
                }
            }
            Ok(other) => self.problem(format!("not a series selector: {other}")),
            Err(e) => self.problem(format!("not PromQL ({e}): {selector}")),
        }
    }

    /// Check an expression; returns the series selected beneath it. `range_of` is the
    /// function whose argument a range selector is.
    fn expr(&mut self, e: &Expr, range_of: Option<&str>) -> Vec<String> {
        match e {
            Expr::VectorSelector(vs) => self.selector(vs, None, false).into_iter().collect(),
            Expr::MatrixSelector(ms) => self
                .selector(&ms.vs, Some(range_of.unwrap_or("")), false)
                .into_iter()
                .collect(),
            Expr::Call(call) => {
                if call.func.name == "histogram_quantile" {
                    self.keeps_le(call.args.args.get(1).map(|a| &**a));
                }
                let mut under = Vec::new();
                for arg in &call.args.args {
                    under.extend(self.expr(arg, Some(call.func.name)));
                }
                under
            }
            Expr::Aggregate(agg) => {
                let under = self.expr(&agg.expr, None);
                if let Some(param) = &agg.param {
                    self.expr(param, None);
                }
                if let Some(modifier) = &agg.modifier {
                    self.grouping(&modifier.labels().labels, &under);
                }
                under
            }
            Expr::Binary(bin) => {
                let lhs = self.expr(&bin.lhs, None);
                let rhs = self.expr(&bin.rhs, None);
                if let Some(m) = &bin.modifier {
                    let both: Vec<String> = lhs.iter().chain(&rhs).cloned().collect();
                    if let Some(matching) = &m.matching {
                        self.grouping(&matching.labels().labels, &both);
                    }
                    match &m.card {
                        VectorMatchCardinality::ManyToOne(extra) => {
                            self.grouping(&extra.labels, &rhs);
                        }
                        VectorMatchCardinality::OneToMany(extra) => {
                            self.grouping(&extra.labels, &lhs);
                        }
                        _ => {}
                    }
                }
                lhs.into_iter().chain(rhs).collect()
            }
            Expr::Paren(p) => self.expr(&p.expr, None),
            Expr::Unary(u) => self.expr(&u.expr, None),
            Expr::Subquery(s) => self.expr(&s.expr, None),
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Vec::new(),
            Expr::Extension(_) => {
                self.problem("an extension node the checker cannot read".into());
                Vec::new()
            }
        }
    }

    /// Every label a `by`/`without`/`on`/`ignoring`/`group_*` names must be a label of every
    /// series beneath it (a misspelt one silently groups everything into one line).
    fn grouping(&mut self, labels: &[String], under: &[String]) {
        for label in labels {
            for series in under {
                if !self.has_label(series, label) {
                    self.problem(format!("groups by `{label}`, which `{series}` lacks"));
                }
            }
        }
    }

    /// `histogram_quantile`'s vector must keep the bucket label: an aggregation beneath it
    /// that drops `le` leaves nothing to interpolate.
    fn keeps_le(&mut self, arg: Option<&Expr>) {
        let mut arg = arg;
        while let Some(Expr::Paren(p)) = arg {
            arg = Some(&p.expr);
        }
        if let Some(Expr::Aggregate(agg)) = arg {
            let keeps = match &agg.modifier {
                Some(LabelModifier::Include(l)) => l.labels.iter().any(|l| l == "le"),
                Some(LabelModifier::Exclude(l)) => !l.labels.iter().any(|l| l == "le"),
                None => false,
            };
            if !keeps {
                self.problem("histogram_quantile over an aggregation that drops `le`".into());
            }
        }
    }

    /// Check one selector; returns its series when it is one the scrape exports. `range_of`
    /// is `Some(function)` for a range selector; `listing` for a variable's label listing,
    /// which reads no values.
    fn selector(
        &mut self,
        vs: &VectorSelector,
        range_of: Option<&str>,
        listing: bool,
    ) -> Option<String> {
        let name = vs.name.clone().or_else(|| {
            matchers(vs)
                .find(|m| m.name == "__name__" && matches!(m.op, MatchOp::Equal))
                .map(|m| m.value.clone())
        });
        let Some(name) = name else {
            self.problem(format!("a selector without a metric name: {vs}"));
            return None;
        };
        let Some(kind) = self.exported.series.get(&name).copied() else {
            let families: Vec<&String> = self.exported.families.keys().collect();
            self.problem(format!(
                "`{name}` is not a series the gateway exports (its families: {families:?})"
            ));
            return None;
        };
        self.used.insert(name.clone());
        if !self.exported.labels.contains_key(&name) {
            self.problem(format!(
                "`{name}` had no sample in the scrape, so its labels cannot be checked"
            ));
            return Some(name);
        }
        for m in matchers(vs) {
            if m.name == "__name__" {
                continue;
            }
            if !self.has_label(&name, &m.name) {
                let known = &self.exported.labels[&name];
                self.problem(format!(
                    "`{name}` has no label `{}` (its labels: {known:?})",
                    m.name
                ));
            }
            if m.value.contains(VAR_MARK) && matches!(m.op, MatchOp::Equal | MatchOp::NotEqual) {
                self.problem(format!(
                    "`{}` compares a multi-value variable with `=`/`!=`; use `=~`/`!~`",
                    m.name
                ));
            }
        }
        if kind == Kind::Cumulative && !listing {
            match range_of {
                Some(f) if COUNTER_FUNCTIONS.contains(&f) => {}
                _ => self.problem(format!(
                    "`{name}` only grows: read it through rate(), irate() or increase()"
                )),
            }
        }
        Some(name)
    }
}

// ---------------------------------------------------------------------------------------
// The dashboard.

/// Every panel of the dashboard, those nested in rows included.
fn panels(dash: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

fn variables(dash: &Value) -> Vec<&Value> {
    dash["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .collect()
}

/// The names queries may use as `$name`: every variable but the data source.
fn query_variables(dash: &Value) -> BTreeSet<String> {
    variables(dash)
        .into_iter()
        .filter(|v| v["type"] != "datasource")
        .filter_map(|v| v["name"].as_str().map(str::to_string))
        .collect()
}

/// How many `expr` keys the JSON holds anywhere (to prove the walk below misses none).
fn count_exprs(v: &Value) -> usize {
    match v {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| usize::from(k == "expr") + count_exprs(v))
            .sum(),
        Value::Array(items) => items.iter().map(count_exprs).sum(),
        _ => 0,
    }
}

/// The places and texts of a query variable's query: `query` (a string, or the Prometheus
/// editor's object) and `definition` (what the editor shows), which must agree.
fn variable_queries(var: &Value) -> Vec<(String, String)> {
    let name = var["name"].as_str().unwrap_or("?");
    let mut out = Vec::new();
    let query = var["query"]["query"].as_str().or(var["query"].as_str());
    if let Some(q) = query {
        out.push((format!("variable `{name}` query"), q.to_string()));
    }
    if let Some(d) = var["definition"].as_str() {
        out.push((format!("variable `{name}` definition"), d.to_string()));
    }
    out
}

/// Check every query of `dash` against `exported`; returns the problems and the series the
/// queries select.
fn check_queries(dash: &Value, exported: &Exported) -> (Vec<String>, BTreeSet<String>) {
    let vars = query_variables(dash);
    let mut c = Checker::new(exported);
    let mut seen = 0;
    for panel in panels(dash) {
        let title = panel["title"].as_str().unwrap_or("?");
        for t in panel["targets"].as_array().into_iter().flatten() {
            let Some(expr) = t["expr"].as_str() else {
                continue;
            };
            seen += 1;
            let place = format!(
                "panel `{title}` target {}",
                t["refId"].as_str().unwrap_or("?")
            );
            match substitute(expr, &vars) {
                Ok(q) => c.query(&place, &q),
                Err(e) => c.problems.push(format!("{place}: {e}")),
            }
        }
    }
    let total = count_exprs(dash);
    if seen != total {
        c.problems.push(format!(
            "{total} `expr` keys in the JSON, {seen} in panel targets: the checker misses some"
        ));
    }
    for var in variables(dash) {
        if var["type"] != "query" {
            continue;
        }
        let queries = variable_queries(var);
        if queries.is_empty() {
            c.problems
                .push(format!("variable {} has no query", var["name"]));
        }
        if queries.len() == 2 && queries[0].1 != queries[1].1 {
            c.problems.push(format!(
                "variable {}: `query` and `definition` differ",
                var["name"]
            ));
        }
        for (place, q) in queries {
            match substitute(&q, &vars) {
                Ok(q) => c.label_values(&place, &q),
                Err(e) => c.problems.push(format!("{place}: {e}")),
            }
        }
    }
    (c.problems, c.used)
}

/// What is wrong with the dashboard's shape: panel ids, data sources, refIds, layout.
fn shape_problems(dash: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if dash["schemaVersion"].as_u64().is_none_or(|v| v < 36) {
        out.push("schemaVersion is missing or older than 36 (Grafana 9)".to_string());
    }
    if dash["uid"].as_str().is_none_or(str::is_empty) {
        out.push("no dashboard uid".to_string());
    }
    let ds_var = variables(dash).into_iter().any(|v| {
        v["name"] == "DS_PROMETHEUS" && v["type"] == "datasource" && v["query"] == "prometheus"
    });
    if !ds_var {
        out.push("no `DS_PROMETHEUS` variable of type datasource over prometheus".to_string());
    }
    let on_var = |ds: &Value| ds["type"] == "prometheus" && ds["uid"] == DATASOURCE_UID;
    let mut ids = BTreeSet::new();
    for panel in panels(dash) {
        let title = panel["title"].as_str().unwrap_or("?");
        match panel["id"].as_u64() {
            Some(id) if !ids.insert(id) => out.push(format!("panel `{title}`: id {id} twice")),
            Some(_) => {}
            None => out.push(format!("panel `{title}` has no integer id")),
        }
        let g = &panel["gridPos"];
        let (x, w) = (g["x"].as_u64(), g["w"].as_u64());
        if !matches!((x, w), (Some(x), Some(w)) if w > 0 && x + w <= 24)
            || g["h"].as_u64().is_none()
        {
            out.push(format!(
                "panel `{title}`: gridPos {g} is not inside the 24 columns"
            ));
        }
        if panel["type"] == "row" {
            continue;
        }
        if !on_var(&panel["datasource"]) {
            out.push(format!(
                "panel `{title}`: datasource {} is not the `DS_PROMETHEUS` variable",
                panel["datasource"]
            ));
        }
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            out.push(format!("panel `{title}` has no query"));
        }
        let mut refs = BTreeSet::new();
        for t in &targets {
            let r = t["refId"].as_str().unwrap_or("");
            if r.is_empty() || !refs.insert(r.to_string()) {
                out.push(format!("panel `{title}`: refId `{r}` missing or twice"));
            }
            if !on_var(&t["datasource"]) {
                out.push(format!(
                    "panel `{title}` target {r}: datasource {} is not the `DS_PROMETHEUS` variable",
                    t["datasource"]
                ));
            }
            if t["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                out.push(format!("panel `{title}` target {r}: no expr"));
            }
        }
    }
    for var in variables(dash) {
        if var["type"] == "query" && !on_var(&var["datasource"]) {
            out.push(format!(
                "variable {}: datasource {} is not the `DS_PROMETHEUS` variable",
                var["name"], var["datasource"]
            ));
        }
    }
    out
}

fn dashboard() -> Value {
    let path = repo_root().join(DASHBOARD);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"))
}

// ---------------------------------------------------------------------------------------
// Against a real gateway.

/// The bearer key the scraper (and the test's client) sends.
const KEY: &str = "k-grafana";

async fn chat(gw: &GatewayProcess, model: &str, text: &str, stream: bool) -> (u16, String) {
    let mut body = json!({
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "stream": stream,
    });
    if stream {
        body["stream_options"] = json!({"include_usage": true});
    }
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.base_url))
        .bearer_auth(KEY)
        .json(&body)
        .send()
        .await
        .expect("gateway reachable");
    let status = resp.status().as_u16();
    (status, resp.text().await.expect("body"))
}

async fn scrape(gw: &GatewayProcess) -> String {
    let resp = reqwest::Client::new()
        .get(format!("{}/metrics", gw.base_url))
        .bearer_auth(KEY)
        .send()
        .await
        .expect("gateway reachable");
    assert_eq!(resp.status().as_u16(), 200);
    resp.text().await.expect("metrics text")
}

#[tokio::test]
async fn every_dashboard_query_selects_series_and_labels_a_real_gateway_exports() {
    let dash = dashboard();
    let m = mock().await;
    // LLM: a 503 then slow answers (so a second call in flight waits at admission).
    script(
        &m,
        "graf",
        json!({
            "steps": [{"status": 503}],
            "then": {"first_token_delay_ms": 300, "inter_chunk_delay_ms": 5, "cached_tokens": 2},
        }),
    )
    .await;
    script(&m, "graf-judge", json!({"then": {"status": 400}})).await;
    let dir = tempfile::tempdir().unwrap();
    let pricing = dir.path().join("pricing.json");
    std::fs::write(
        &pricing,
        json!({"model-a": {"input": 1.0, "output": 2.0, "cached_input": 0.5}}).to_string(),
    )
    .unwrap();
    let mut env = source(&m, "openai", 1, "graf", "model-a");
    env.extend([
        kv("JUDGE__OPENAI__1__BASE_URL", m.base_url("graf-judge")),
        kv("JUDGE__OPENAI__1__MODEL", "judge-model"),
        kv("JUDGE__SELECTOR", "round-robin"),
        kv("LLM__OPENAI__1__MAX_CONCURRENCY", 1),
        kv("LLM__RETRY__BASE_DELAY_S", "0.01"),
        kv("PGW_CACHE_BACKEND", "memory"),
        kv("LLM__CACHE__TTL_S", 60),
        kv("JUDGE__CACHE__TTL_S", 60),
        kv("PGW_PRICING_FILE", pricing.display()),
        kv("PGW_TELEMETRY_BACKEND", "sqlite"),
        kv("PGW_API_KEYS", KEY),
    ]);
    let gw = gateway(env).await;

    // A failed attempt then an answer; the same call from the cache; a stream (TTFT and
    // inter-token gaps); two calls at once on a source that takes one (an admission wait);
    // a call the upstream rejects (a failed call with its error class).
    assert_eq!(chat(&gw, "llm", "first", false).await.0, 200);
    assert_eq!(chat(&gw, "llm", "first", false).await.0, 200);
    let (status, text) = chat(&gw, "llm", "a stream", true).await;
    assert_eq!(status, 200, "{text}");
    // The second call leaves once the first is at the upstream, holding the one slot.
    let before = hits(&m, "graf").await.len();
    let later = async {
        eventually(10, || async {
            (hits(&m, "graf").await.len() > before).then_some(())
        })
        .await;
        chat(&gw, "llm", "second at once", false).await
    };
    let (a, b) = tokio::join!(chat(&gw, "llm", "first at once", false), later);
    assert_eq!((a.0, b.0), (200, 200), "{} {}", a.1, b.1);
    assert_eq!(chat(&gw, "judge", "rejected", false).await.0, 400);

    // Rows reach the metrics as calls end; give the last ones a moment.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (exported, problems, used, text) = loop {
        let text = scrape(&gw).await;
        let exported = Exported::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let (problems, used) = check_queries(&dash, &exported);
        if problems.is_empty() || tokio::time::Instant::now() > deadline {
            break (exported, problems, used, text);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        problems.is_empty(),
        "{} problem(s) in {DASHBOARD}:\n  {}\n\n/metrics:\n{text}",
        problems.len(),
        problems.join("\n  ")
    );

    // Every family in the scrape is charted, or left out with a reason. (The text format
    // leaves out a family that has no sample yet, such as the OCR one here: that the
    // families of NOT_CHARTED exist is checked on the registry itself, below.)
    let uncharted: Vec<&String> = exported
        .families
        .iter()
        .filter(|(_, series)| !series.iter().any(|s| used.contains(s)))
        .map(|(family, _)| family)
        .filter(|f| !NOT_CHARTED.iter().any(|(n, _)| n == f))
        .collect();
    assert!(
        uncharted.is_empty(),
        "exported but on no panel of {DASHBOARD}: {uncharted:?}; add a panel, or add the \
         family to NOT_CHARTED with the reason"
    );

    // The same check fails on this very dashboard once a query names a series or a label
    // that does not exist.
    let raw = serde_json::to_string(&dash).unwrap();
    for (from, to, expected) in [
        (
            "pgw_ttft_seconds_bucket",
            "pgw_ttft_second_bucket",
            "`pgw_ttft_second_bucket` is not a series the gateway exports",
        ),
        (
            "pgw_cache_misses_total",
            "pgw_cache_misses",
            "`pgw_cache_misses` is not a series the gateway exports",
        ),
        (
            "by (kind)",
            "by (knd)",
            "groups by `knd`, which `pgw_tokens_total` lacks",
        ),
        (
            "pgw_breaker_state{instance=~\\\"$instance\\\", scope=~\\\"$scope\\\", source",
            "pgw_breaker_state{instance=~\\\"$instance\\\", scope=~\\\"$scope\\\", sorce",
            "`pgw_breaker_state` has no label `sorce`",
        ),
    ] {
        assert!(raw.contains(from), "the dashboard no longer has `{from}`");
        let broken: Value = serde_json::from_str(&raw.replace(from, to)).unwrap();
        let (problems, _) = check_queries(&broken, &exported);
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "replacing `{from}` by `{to}` should report `{expected}`, got {problems:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Without a gateway.

#[test]
fn the_dashboard_has_unique_panel_ids_and_every_panel_on_the_datasource_variable() {
    let dash = dashboard();
    let problems = shape_problems(&dash);
    assert!(
        problems.is_empty(),
        "{DASHBOARD}:\n  {}",
        problems.join("\n  ")
    );
    let vars = query_variables(&dash);
    for v in ["scope", "source"] {
        assert!(vars.contains(v), "no `{v}` template variable: {vars:?}");
    }
}

#[test]
fn the_families_left_off_the_dashboard_are_families_of_the_gateway() {
    // A family only shows in the text once it has a sample: give the OCR one its sample.
    let metrics = polygateway::telemetry::Metrics::new();
    metrics.ocr_boxes_dropped("OCR", "monkeyocr-1", 1);
    let exported = Exported::parse(&metrics.encode()).unwrap();
    for (family, why) in NOT_CHARTED {
        assert!(!why.is_empty());
        assert!(
            exported.families.contains_key(*family),
            "NOT_CHARTED names `{family}`, which the gateway does not export"
        );
    }
    // And an empty family is not in the text at all, which is why the end-to-end test
    // makes calls until every charted family has samples.
    let empty = Exported::parse(&polygateway::telemetry::Metrics::new().encode()).unwrap();
    assert!(!empty.families.contains_key("pgw_requests_total"));
}

#[test]
fn the_scrape_config_targets_the_default_listener_and_path() {
    let yml = std::fs::read_to_string(repo_root().join(SCRAPE_CONFIG)).unwrap();
    let listen = polygateway::config::DEFAULT_LISTEN.to_string();
    let active: Vec<&str> = yml
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert!(
        active
            .iter()
            .any(|l| l.starts_with("- targets:") && l.contains(&format!("\"{listen}\""))),
        "{SCRAPE_CONFIG} does not scrape the default listener {listen}"
    );
    assert!(active.contains(&"metrics_path: /metrics"), "{yml}");
}

/// A small scrape in the gateway's format (one family declared without samples).
const SCRAPE: &str = r#"# HELP pgw_requests_total Logical calls.
# TYPE pgw_requests_total counter
pgw_requests_total{scope="LLM",source="openai-1",outcome="success",error_class=""} 2
pgw_requests_total{scope="LLM",source="",outcome="failure",error_class="a \"quoted\", {odd} value"} 1
# HELP pgw_request_duration_seconds Wall time.
# TYPE pgw_request_duration_seconds histogram
pgw_request_duration_seconds_sum{scope="LLM",outcome="success"} 0.5
pgw_request_duration_seconds_count{scope="LLM",outcome="success"} 2
pgw_request_duration_seconds_bucket{scope="LLM",outcome="success",le="0.5"} 2
pgw_request_duration_seconds_bucket{scope="LLM",outcome="success",le="+Inf"} 2
# HELP pgw_breaker_state Breaker.
# TYPE pgw_breaker_state gauge
pgw_breaker_state{scope="LLM",source="openai-1"} 0
# HELP pgw_cache_hits_total Hits.
# TYPE pgw_cache_hits_total counter
# HELP pgw_telemetry_degraded Degraded.
# TYPE pgw_telemetry_degraded gauge
pgw_telemetry_degraded 0
"#;

#[test]
fn the_query_checker_refuses_series_labels_and_reads_that_do_not_exist() {
    let exported = Exported::parse(SCRAPE).unwrap();
    assert_eq!(
        exported.labels["pgw_requests_total"],
        ["error_class", "outcome", "scope", "source"]
            .map(String::from)
            .into()
    );
    assert!(exported.labels["pgw_request_duration_seconds_bucket"].contains("le"));
    assert!(!exported.labels.contains_key("pgw_cache_hits_total"));
    let vars: BTreeSet<String> = ["scope", "source", "instance"].map(String::from).into();
    let check = |q: &str| {
        let mut c = Checker::new(&exported);
        match substitute(q, &vars) {
            Ok(s) => c.query("q", &s),
            Err(e) => c.problems.push(e),
        }
        c.problems
    };
    for good in [
        r#"sum by (scope, outcome) (rate(pgw_requests_total{scope=~"$scope", instance=~"$instance"}[$__rate_interval]))"#,
        r#"histogram_quantile(0.99, sum by (le, scope) (rate(pgw_request_duration_seconds_bucket{outcome!="cache_hit"}[${__rate_interval}])))"#,
        r#"sum(increase(pgw_requests_total{source=~"${source:regex}"}[$__range])) / sum(rate(pgw_request_duration_seconds_count[5m]))"#,
        r#"count(max by (scope, source) (pgw_breaker_state) == 2) or vector(0)"#,
        r#"max by (instance, job) (pgw_telemetry_degraded)"#,
        r#"{__name__="pgw_breaker_state", scope="LLM"}"#,
    ] {
        assert_eq!(check(good), Vec::<String>::new(), "{good}");
    }
    for (bad, why) in [
        (
            "rate(pgw_nope_total[5m])",
            "`pgw_nope_total` is not a series",
        ),
        ("rate(pgw_requests[5m])", "`pgw_requests` is not a series"),
        (
            "rate(pgw_request_duration_seconds[5m])",
            "`pgw_request_duration_seconds` is not a series",
        ),
        (
            r#"rate(pgw_requests_total{sorce="x"}[5m])"#,
            "`pgw_requests_total` has no label `sorce`",
        ),
        (
            "rate(pgw_request_duration_seconds_sum{le=\"1\"}[5m])",
            "has no label `le`",
        ),
        (
            "sum by (sorce) (rate(pgw_requests_total[5m]))",
            "groups by `sorce`",
        ),
        (
            "rate(pgw_requests_total[5m]) / on (kind) rate(pgw_requests_total[5m])",
            "groups by `kind`",
        ),
        ("rate(pgw_cache_hits_total[5m])", "had no sample"),
        ("pgw_requests_total", "only grows"),
        ("max_over_time(pgw_requests_total[5m])", "only grows"),
        (
            "histogram_quantile(0.9, sum by (scope) (rate(pgw_request_duration_seconds_bucket[5m])))",
            "drops `le`",
        ),
        (
            "histogram_quantile(0.9, sum(rate(pgw_request_duration_seconds_bucket[5m])))",
            "drops `le`",
        ),
        (
            r#"rate(pgw_requests_total{scope="$scope"}[5m])"#,
            "use `=~`",
        ),
        (
            "rate(pgw_requests_total[5m]) * $factor",
            "`$factor` is not a variable",
        ),
        ("rate(pgw_requests_total[5m]", "not PromQL"),
        (r#"{__name__=~"pgw_.+"}"#, "without a metric name"),
    ] {
        let problems = check(bad);
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "`{bad}` should be refused with `{why}`, got {problems:?}"
        );
    }
    let listing = |q: &str| {
        let mut c = Checker::new(&exported);
        c.label_values("v", &substitute(q, &vars).unwrap());
        c.problems
    };
    assert!(listing(r#"label_values(pgw_breaker_state{scope=~"$scope"}, source)"#).is_empty());
    assert!(listing("label_values(pgw_requests_total, instance)").is_empty());
    for (bad, why) in [
        ("label_values(pgw_breaker_state, sorce)", "no label `sorce`"),
        ("label_values(scope)", "names no series"),
        ("label_values(pgw_breakers, scope)", "not a series"),
        ("query_result(pgw_breaker_state)", "not a `label_values"),
    ] {
        let problems = listing(bad);
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "`{bad}` should be refused with `{why}`, got {problems:?}"
        );
    }
    assert!(Exported::parse("# TYPE x counter\ny_total 1\n").is_err());
}

#[test]
fn the_shape_checker_refuses_twice_used_ids_and_foreign_datasources() {
    let ds = json!({"type": "prometheus", "uid": DATASOURCE_UID});
    let target = |e: &str| json!({"refId": "A", "expr": e, "datasource": ds});
    let dash = json!({
        "schemaVersion": 39,
        "uid": "x",
        "templating": {"list": [
            {"name": "DS_PROMETHEUS", "type": "datasource", "query": "prometheus"},
            {"name": "scope", "type": "query", "datasource": {"type": "prometheus", "uid": "abc"},
             "query": "label_values(pgw_breaker_state, scope)"},
        ]},
        "panels": [
            {"id": 1, "type": "row", "title": "r", "gridPos": {"x": 0, "y": 0, "w": 24, "h": 1},
             "panels": [
                {"id": 2, "type": "timeseries", "title": "nested", "datasource": ds,
                 "gridPos": {"x": 0, "y": 1, "w": 12, "h": 8},
                 "targets": [target("pgw_breaker_state"), target("pgw_breaker_state")]},
             ]},
            {"id": 2, "type": "stat", "title": "fixed uid",
             "datasource": {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"},
             "gridPos": {"x": 16, "y": 1, "w": 12, "h": 8},
             "targets": [{"refId": "A", "expr": "pgw_breaker_state"}]},
        ],
    });
    let problems = shape_problems(&dash).join("\n");
    for why in [
        "panel `fixed uid`: id 2 twice",
        "panel `nested`: refId `A` missing or twice",
        "panel `fixed uid`: datasource",
        "panel `fixed uid` target A: datasource null",
        "panel `fixed uid`: gridPos",
        "variable \"scope\": datasource",
    ] {
        assert!(problems.contains(why), "missing `{why}` in:\n{problems}");
    }
    // An `expr` outside panel targets (here an annotation) is noticed, not skipped.
    let mut with_annotation = dash.clone();
    with_annotation["annotations"] = json!({"list": [{"expr": "pgw_nope"}]});
    let exported = Exported::parse(SCRAPE).unwrap();
    let (problems, _) = check_queries(&with_annotation, &exported);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("the checker misses some")),
        "{problems:?}"
    );
}
